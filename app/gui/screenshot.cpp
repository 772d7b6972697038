#include "app/gui/screenshot.h"

#include <glad/gl.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>  // implementation in Debian's libstb

#include "model/file_io.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace fl::gui {

Status read_back_buffer(int width, int height, std::vector<uint8_t>* rgb) {
  if (width <= 0 || height <= 0) return Status::Error("the window has no pixels to save");
  const size_t row = static_cast<size_t>(width) * 3;
  std::vector<uint8_t> bottom_up(row * height);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, bottom_up.data());
  if (const GLenum err = glGetError(); err != GL_NO_ERROR) {
    char code[16];
    std::snprintf(code, sizeof(code), "0x%04x", err);
    return Status::Error(std::string("glReadPixels failed (OpenGL error ") + code + ")");
  }
  // OpenGL's first row is the bottom one; PNG's is the top one.
  rgb->resize(bottom_up.size());
  for (int y = 0; y < height; ++y) {
    std::memcpy(rgb->data() + row * y, bottom_up.data() + row * (height - 1 - y), row);
  }
  return Status::Ok();
}

Status read_back_region(PixelRect* rect, int fb_width, int fb_height, std::vector<uint8_t>* rgb) {
  const int x0 = std::clamp(rect->x, 0, fb_width), y0 = std::clamp(rect->y, 0, fb_height);
  const int x1 = std::clamp(rect->x + rect->w, 0, fb_width);
  const int y1 = std::clamp(rect->y + rect->h, 0, fb_height);
  *rect = PixelRect{x0, y0, x1 - x0, y1 - y0};
  if (rect->w <= 0 || rect->h <= 0) return Status::Error("the region to save has no pixels");
  const size_t row = static_cast<size_t>(rect->w) * 3;
  std::vector<uint8_t> bottom_up(row * rect->h);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(x0, fb_height - y1, rect->w, rect->h, GL_RGB, GL_UNSIGNED_BYTE, bottom_up.data());
  if (const GLenum err = glGetError(); err != GL_NO_ERROR) {
    char code[16];
    std::snprintf(code, sizeof(code), "0x%04x", err);
    return Status::Error(std::string("glReadPixels failed (OpenGL error ") + code + ")");
  }
  rgb->resize(bottom_up.size());
  for (int y = 0; y < rect->h; ++y) {
    std::memcpy(rgb->data() + row * y, bottom_up.data() + row * (rect->h - 1 - y), row);
  }
  return Status::Ok();
}

Status render_caption_strip(const viz::CaptionLayout& layout, int fb_width, int fb_height,
                            std::vector<uint8_t>* rgb, int* strip_width, int* strip_height) {
  const int w = std::min(fb_width, static_cast<int>(std::lround(layout.width)));
  const int h = std::min(fb_height, static_cast<int>(std::ceil(layout.height)));
  if (w <= 0 || h <= 0) return Status::Error("the caption strip has no pixels");
  ImGuiIO& io = ImGui::GetIO();
  ImFont* font = io.Fonts->Fonts.empty() ? nullptr : io.Fonts->Fonts[0];
  if (!font) return Status::Error("no font to draw the caption with");
  // A draw list of our own, drawn with the same renderer and font atlas as the window.
  ImDrawList dl(ImGui::GetDrawListSharedData());
  dl._ResetForNewFrame();
  dl.PushTextureID(io.Fonts->TexID);
  dl.PushClipRect(ImVec2(0, 0),
                  ImVec2(static_cast<float>(fb_width), static_cast<float>(fb_height)));
  const ImU32 background = IM_COL32(20, 24, 32, 255);
  dl.AddRectFilled(ImVec2(0, 0), ImVec2(static_cast<float>(w), static_cast<float>(h)), background);
  dl.AddLine(ImVec2(0, 0.5f), ImVec2(static_cast<float>(w), 0.5f), IM_COL32(90, 140, 200, 255),
             1.0f);
  for (size_t i = 0; i < layout.lines.size(); ++i) {
    const ImVec2 pos(layout.padding, layout.padding + layout.line_height * static_cast<float>(i));
    dl.AddText(font, layout.font_size, pos, IM_COL32(225, 228, 235, 255), layout.lines[i].c_str());
  }
  dl.PopClipRect();
  dl.PopTextureID();
  ImDrawList* lists[] = {&dl};
  ImDrawData data;
  data.Valid = true;
  data.CmdLists = lists;
  data.CmdListsCount = 1;
  data.TotalVtxCount = dl.VtxBuffer.Size;
  data.TotalIdxCount = dl.IdxBuffer.Size;
  data.DisplayPos = ImVec2(0, 0);
  data.DisplaySize = ImVec2(static_cast<float>(fb_width), static_cast<float>(fb_height));
  data.FramebufferScale = ImVec2(1, 1);
  glViewport(0, 0, fb_width, fb_height);
  glClearColor(20 / 255.0f, 24 / 255.0f, 32 / 255.0f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(&data);
  glFinish();
  PixelRect rect{0, 0, w, h};
  if (Status st = read_back_region(&rect, fb_width, fb_height, rgb); !st.ok()) return st;
  *strip_width = rect.w;
  *strip_height = rect.h;
  return Status::Ok();
}

Status write_png_atomic(const std::string& path, int width, int height,
                        const std::vector<uint8_t>& rgb, bool replace_existing) {
  // Encoded in memory, then written by the one atomic writer (model/file_io.h): an
  // exclusive temporary file beside the output, fsync, rename.
  std::string png;
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data),
                                               static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, width, height, 3, rgb.data(), width * 3) ||
      png.empty()) {
    return Status::Error("cannot write " + shorten_for_message(path, kShownPathChars) +
                         ": the picture could not be encoded as PNG");
  }
  WriteOptions options;
  options.replace_existing = replace_existing;
  return write_file_atomically(path, png, options);
}

}  // namespace fl::gui
