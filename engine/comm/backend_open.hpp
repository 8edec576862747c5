#pragma once
// A second world communicator of another backend over the same ranks, for recipes that compare
// backends in one run (recipes/protocol_compare.lua). The ranks must call open_backend together
// (it is collective on the world) and get rank r of the new communicator = rank r of the world.
// Implemented by the backend table (backends.cpp).
#include <memory>
#include <string>
#include <vector>

#include "communicator.hpp"

namespace cs {

// The backends this build can open beside `world` in this run, in the order mpi, gloo, nccl:
// mpi needs an MPI launch, gloo a build with Gloo, nccl a build with NCCL (whether a GPU is
// there is only known when it is opened). The same list on every rank.
std::vector<std::string> backends_available(const Communicator& world);

// Opens `name` over the ranks of `world`. Throws InputError (exit 1) for a backend this build or
// this launch cannot open (the message says why), Error for one that fails to start (NCCL with
// no GPU: the same error on every rank).
std::unique_ptr<Communicator> open_backend(const std::string& name, Communicator& world, double timeout_s);

}  // namespace cs
