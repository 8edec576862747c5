#pragma once
// What the NCCL backend's files (engine/comm/nccl_*.cpp) share, internal to them: NCCL's error
// text, one error agreed on by every rank, the names NCCL reads later, whether splits share
// NCCL's resources, and the family of communicators that share one abort flag.
#include <nccl.h>

#include <mutex>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "error.hpp"

namespace cs {

// NCCL's text for `r`, with ncclGetLastError's detail when there is one.
std::string nccl_text(ncclResult_t r, ncclComm_t comm);

// Every rank passes its error ("" for none); all of them throw the lowest failing rank's.
void agree(Communicator& ctl, const std::string& mine, ExitCode code, const std::vector<std::string>& hosts);

// NCCL keeps config.commName by pointer and reads it later, on its own threads (init.cc
// parseCommConfig: `comm->config.commName = internalConfigPtr->commName`; the profiler plugin's
// init): the names live as long as the process.
const char* stable_name(const std::string& s);

// NCCL_COMM_SPLIT_SHARE_RESOURCES=0 overrides config.splitShare (init.cc envConfigOverride).
bool split_share_on();

// Communicators that share NCCL's abort flag: a split of a communicator created with
// splitShare = 1 (init.cc ncclCommInitChildComm: `childComm->abortFlag = comm->abortFlag`). An
// abort of one of them aborts them all inside NCCL, so all of them are unusable from then on.
struct NcclFamily {
  std::mutex mu;
  bool aborted = false;
  std::string why;
};

}  // namespace cs
