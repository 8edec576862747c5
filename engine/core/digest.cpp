#include "digest.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

namespace cs {

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

// The SHA-256 of a file, hex; false (and `*why`) when it cannot be read.
bool sha256_file(const std::string& path, std::string* hex, unsigned long long* size, std::string* why) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *why = "cannot open " + path;
    return false;
  }
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  *size = 0;
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = f.gcount();
    if (got <= 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(got));
    *size += static_cast<unsigned long long>(got);
  }
  if (f.bad()) {
    *why = "cannot read " + path;
    return false;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* hx = "0123456789abcdef";
  hex->clear();
  for (unsigned int i = 0; i < len; ++i) {
    *hex += hx[md[i] >> 4];
    *hex += hx[md[i] & 15];
  }
  return true;
}

}  // namespace cs
