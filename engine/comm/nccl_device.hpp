#pragma once
// The NCCL backend's choice of GPU, internal to engine/comm/nccl_*.cpp (its rules, public for
// the tests, are declared in nccl_communicator.hpp; nccl_device.cpp holds them all).
#include <string>
#include <vector>

#include "communicator.hpp"

namespace cs {

// This rank's GPU, chosen by the same rule on every rank from what every rank reports over
// `ctl` (its host, devices, NCCL version and environment), so that all of them refuse alike
// (none is left waiting): InputError for a rank without a usable GPU, different NCCL libraries,
// a COMMSCRIPT_DEVICE that is no device, NCCL_COMM_BLOCKING, a bad COMMSCRIPT_TIMING, or two
// ranks of a host on one GPU. `hosts` gets every rank's host name.
int agree_on_device(Communicator& ctl, std::vector<std::string>* hosts);

}  // namespace cs
