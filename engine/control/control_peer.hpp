#pragma once
// Shared by the control plane's listeners (coordinator.cpp, host_relay.cpp).

namespace cs::coord {

// A peer the control plane does not admit: logged (the first ten) and dropped; the job goes on.
void refused(int fd, const char* why);

}  // namespace cs::coord
