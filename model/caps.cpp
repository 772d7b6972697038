#include "model/caps.h"

#include <algorithm>

namespace fl {

bool CopyReferenceCache::find(int64_t half, CacheMode cache, double* gbps) const {
  const auto it = gbps_.find({half, static_cast<int>(cache)});
  if (it == gbps_.end()) return false;
  *gbps = it->second;
  return true;
}

void CopyReferenceCache::add(int64_t half, CacheMode cache, double gbps,
                             std::vector<CopyBandwidth>* list) {
  const Key key{half, static_cast<int>(cache)};
  const auto before = [](const CopyBandwidth& a, const CopyBandwidth& b) {
    return a.cache != b.cache ? a.cache < b.cache : a.bytes < b.bytes;
  };
  const auto same = [](const CopyBandwidth& a, const CopyBandwidth& b) {
    return a.cache == b.cache && a.bytes == b.bytes;
  };
  CopyBandwidth entry;
  entry.bytes = 2 * half;
  entry.cache = cache;
  entry.gbps = gbps;
  if (gbps_.count(key) == 0) order_.push_back(key);
  gbps_[key] = gbps;
  auto at = std::lower_bound(list->begin(), list->end(), entry, before);
  if (at != list->end() && same(*at, entry))
    *at = entry;
  else
    list->insert(at, entry);
  while (gbps_.size() > cap_) {
    const Key oldest = order_.front();
    order_.pop_front();
    gbps_.erase(oldest);
    CopyBandwidth gone;
    gone.bytes = 2 * oldest.first;
    gone.cache = static_cast<CacheMode>(oldest.second);
    const auto it = std::lower_bound(list->begin(), list->end(), gone, before);
    if (it != list->end() && same(*it, gone)) list->erase(it);
  }
}

size_t trim_oldest(std::vector<Measurement>* history, size_t cap) {
  if (history->size() <= cap) return 0;
  const size_t drop = history->size() - cap;
  history->erase(history->begin(), history->begin() + static_cast<std::ptrdiff_t>(drop));
  return drop;
}

}  // namespace fl
