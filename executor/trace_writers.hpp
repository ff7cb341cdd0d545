// trace_writers — the two files a trace is written as (docs/tracing.md):
// Chrome trace-event JSON (Perfetto, chrome://tracing) and an SVG timeline,
// both drawn from one trace_snapshot of the recorder (trace.hpp). Called
// once, by trace_recorder::write_files at shutdown, after the workers have
// been joined; nothing here runs while they do.
//
// A unit of its own so the runtime's recorder does not carry the drawing
// code; it is still in libcanopy, and every program links it, since
// CANOPY_TRACE turns tracing on in any program without a rebuild.
#pragma once

#include <string>
#include <system_error>

#include "trace.hpp"

namespace canopy::detail {

// The Chrome trace-event JSON document, appended to `out`.
void write_trace_json(const trace_snapshot& trace, std::string& out);
// The SVG timeline, appended to `out`.
void write_trace_svg(const trace_snapshot& trace, std::string& out);
// Both documents, to `json_path` and `svg_path`. Returns the first error;
// `error_message` then names the file.
[[nodiscard]] std::error_code write_trace_files(const trace_snapshot& trace,
                                                const std::string& json_path,
                                                const std::string& svg_path,
                                                std::string& error_message);

}  // namespace canopy::detail
