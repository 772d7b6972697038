// Reading the window back and saving it as PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.h"

namespace fl::gui {

// Reads the current back buffer (call after rendering, before swapping) as RGB rows, top row
// first. Needs a current OpenGL context.
Status read_back_buffer(int width, int height, std::vector<uint8_t>* rgb);

// Writes `rgb` (top row first) as PNG to a temporary name in the same folder, then renames it
// into place, so a reader never sees a half-written file.
Status write_png_atomic(const std::string& path, int width, int height,
                        const std::vector<uint8_t>& rgb);

}  // namespace fl::gui
