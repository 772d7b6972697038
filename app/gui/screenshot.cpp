#include "app/gui/screenshot.h"

#include <glad/gl.h>
#include <stb_image_write.h>  // implementation in Debian's libstb
#include <unistd.h>

#include <cerrno>
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

Status write_png_atomic(const std::string& path, int width, int height,
                        const std::vector<uint8_t>& rgb) {
  const std::string temporary = path + ".tmp-" + std::to_string(getpid());
  if (!stbi_write_png(temporary.c_str(), width, height, 3, rgb.data(), width * 3)) {
    const int err = errno;
    std::remove(temporary.c_str());
    return Status::Error("cannot write " + temporary +
                         (err ? ": " + std::string(std::strerror(err)) : ""));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temporary.c_str());
    return Status::Error("cannot move the screenshot into place at " + path + ": " +
                         std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace fl::gui
