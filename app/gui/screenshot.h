// Reading the window back and saving it as PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/status.h"
#include "viz/caption.h"

namespace fl::gui {

// Reads the current back buffer (call after rendering, before swapping) as RGB rows, top row
// first. Needs a current OpenGL context.
Status read_back_buffer(int width, int height, std::vector<uint8_t>* rgb);

// A rectangle of the framebuffer in pixels, top-left origin.
struct PixelRect {
  int x = 0, y = 0, w = 0, h = 0;
};

// Reads `rect` of the back buffer (clipped to it) as RGB rows, top row first; *rect is updated to
// what was read. `fb_height` is the framebuffer's height (OpenGL counts rows from the bottom).
Status read_back_region(PixelRect* rect, int fb_width, int fb_height, std::vector<uint8_t>* rgb);

// Draws the caption strip laid out by viz::layout_caption at the top-left of the back buffer
// with Dear ImGui's renderer and the window's font, and reads it back: layout.width (clipped to
// the framebuffer) x *strip_height RGB rows. Call after ImGui::Render() of the frame being saved
// and after reading that frame: it overwrites the back buffer, so render the frame's draw data
// again before swapping.
Status render_caption_strip(const viz::CaptionLayout& layout, int fb_width, int fb_height,
                            std::vector<uint8_t>* rgb, int* strip_width, int* strip_height);

// Writes `rgb` (top row first) as PNG to a temporary name in the same folder, then renames it
// into place, so a reader never sees a half-written file.
// `replace_existing` false: refuse when the file exists, also one that appears meanwhile.
Status write_png_atomic(const std::string& path, int width, int height,
                        const std::vector<uint8_t>& rgb, bool replace_existing = true);

}  // namespace fl::gui
