#pragma once

#include <array>
#include <cstddef>

// nqueens: the number of ways to place `size` queens on a size x size board,
// with the per-node work and fork structure of the libfork program in the
// tzcnt/runtime-benchmarks suite: a node holds the queens of rows
// 0 .. row - 1 (board[r] is the column of row r's queen), checks each column
// of row `row` against the placed queens only (column_safe, O(row) a
// column), and forks one child per safe column with the board copied and
// that queen added, then joins them all and adds their counts; a full board
// counts 1. Checked against expected_solutions (14,200 for size 12; the
// suite's table: 2,680 for 11, 365,596 for 14). Result: wall time in ms.
namespace canopy::bench::nqueens {

inline constexpr int size = 12;
inline constexpr long long expected_solutions = 14'200;

using board = std::array<char, size>;

// Whether no queen of rows 0 .. row - 1 of `placed` attacks `column` of
// row `row`: no placed queen in that column or on either of its diagonals
// (the suite's filter, which trusts the placed queens to be safe already).
[[nodiscard]] constexpr bool column_safe(const board& placed, int row, int column) {
  for (int placed_row = 0; placed_row < row; ++placed_row) {
    const int other = placed[placed_row];
    const int distance = row - placed_row;
    if (column == other || column == other - distance || column == other + distance) {
      return false;
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
