#pragma once

#include <array>
#include <cstddef>

// nqueens: the number of ways to place `size` queens on a size x size board,
// with the fork structure of the libfork program in the
// tzcnt/runtime-benchmarks suite: a node holds the queens of rows
// 0 .. row - 1 (board[r] is the column of row r's queen), and forks one child
// per column of row `row` that no placed queen attacks (queens_ok), then
// joins them and adds their counts; a full board counts 1. Checked against
// expected_solutions (14,200 for size 12; the suite's table: 2,680 for 11,
// 365,596 for 14). Result: wall time in ms.
namespace canopy::bench::nqueens {

inline constexpr int size = 12;
inline constexpr long long expected_solutions = 14'200;

using board = std::array<char, size>;

// Whether the first `rows` queens of `placed` leave each other alone: no
// two in one column or on one diagonal (the suite's ok()).
[[nodiscard]] constexpr bool queens_ok(int rows, const board& placed) {
  for (int first = 0; first < rows; ++first) {
    const int column = placed[first];
    for (int second = first + 1; second < rows; ++second) {
      const int other = placed[second];
      const int distance = second - first;
      if (other == column || other == column - distance || other == column + distance) {
        return false;
      }
    }
  }
  return true;
}

// `placed` with row `row`'s queen in `column`.
[[nodiscard]] constexpr board with_queen(board placed, int row, int column) {
  placed[row] = static_cast<char>(column);
  return placed;
}

}  // namespace canopy::bench::nqueens
