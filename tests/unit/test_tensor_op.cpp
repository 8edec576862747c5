// Tensor (host buffers, views) and make_op's validation against a communicator.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "error.hpp"
#include "op.hpp"
#include "self_communicator.hpp"
#include "tensor.hpp"

// The link uses -Wl,--wrap=aligned_alloc (tests/unit/CMakeLists.txt): every aligned_alloc the
// engine makes comes here first, so a test can tell whether a tensor was allocated at all.
namespace {
std::atomic<uint64_t> g_aligned_alloc_calls{0};
}
extern "C" void* __real_aligned_alloc(size_t alignment, size_t size);
extern "C" void* __wrap_aligned_alloc(size_t alignment, size_t size) {
  g_aligned_alloc_calls.fetch_add(1);
  return __real_aligned_alloc(alignment, size);
}

namespace {

using cs::Collective;
using cs::DType;
using cs::ReduceOp;
using cs::Tensor;

// The UsageError message of make_op(args...) (a recipe bug: exit 2); fails the test when
// nothing is thrown.
template <class... A>
std::string make_op_error(A&&... args) {
  try {
    cs::make_op(std::forward<A>(args)...);
  } catch (const cs::UsageError& e) {
    CHECK(e.code() == cs::ExitCode::runtime);
    return e.what();
  }
  FAIL("make_op accepted it");
  return {};
}

}  // namespace

TEST_CASE("Tensor::host: zero-filled, sized by its dtype", "[tensor]") {
  for (DType dt : cs::kAllDTypes) {
    INFO(cs::dtype_name(dt));
    const Tensor t = Tensor::host(dt, 37);
    REQUIRE(t.valid());
    CHECK(t.dtype() == dt);
    CHECK(t.count() == 37);
    CHECK(t.elem_size() == cs::dtype_size(dt));
    CHECK(t.bytes() == 37 * cs::dtype_size(dt));
    const auto* bytes = static_cast<const unsigned char*>(t.data());
    size_t nonzero = 0;
    for (size_t i = 0; i < t.bytes(); ++i) nonzero += bytes[i] != 0;
    CHECK(nonzero == 0);
    for (size_t i = 0; i < t.count(); ++i) CHECK(t.get(i) == 0.0);
    CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  }
  CHECK(cs::dtype_size(DType::int8) == 1);
  CHECK(cs::dtype_size(DType::uint32) == 4);
  CHECK(cs::dtype_size(DType::float64) == 8);
  const Tensor empty = Tensor::host(DType::float32, 0);
  CHECK(empty.valid());
  CHECK(empty.count() == 0);
  CHECK_FALSE(Tensor().valid());
  CHECK(Tensor().data() == nullptr);
}

TEST_CASE("Tensor get/set/fill convert to the dtype", "[tensor]") {
  Tensor f = Tensor::host(DType::float64, 4);
  f.set(0, 1.25);
  f.set(3, -2.5);
  CHECK(f.get(0) == 1.25);
  CHECK(f.get(1) == 0.0);
  CHECK(f.get(3) == -2.5);
  CHECK(static_cast<const double*>(f.data())[3] == -2.5);

  Tensor i = Tensor::host(DType::int32, 3);
  i.set(1, 7.0);
  CHECK(i.get(1) == 7.0);
  CHECK(static_cast<const int32_t*>(i.data())[1] == 7);
  i.set(2, -3.0);
  CHECK(static_cast<const int32_t*>(i.data())[2] == -3);
  i.set(0, 2147483647.0);
  CHECK(static_cast<const int32_t*>(i.data())[0] == INT32_MAX);

  Tensor u = Tensor::host(DType::uint8, 5);
  u.fill(200);
  for (size_t k = 0; k < 5; ++k) CHECK(static_cast<const uint8_t*>(u.data())[k] == 200);
  u.set(4, 255);
  CHECK(u.get(4) == 255.0);

  Tensor g = Tensor::host(DType::float32, 6);
  g.fill(0.5);
  for (size_t k = 0; k < 6; ++k) CHECK(g.get(k) == 0.5);

  CHECK_THROWS_AS(f.get(4), cs::UsageError);
  CHECK_THROWS_AS(f.set(4, 1.0), cs::UsageError);
  CHECK_THROWS_AS(f.get(SIZE_MAX), cs::UsageError);
}

TEST_CASE("Tensor set/fill refuse values an integer dtype cannot hold", "[tensor]") {
  Tensor i8 = Tensor::host(DType::int8, 2);
  i8.set(0, 127);
  i8.set(1, -128);
  CHECK(i8.get(0) == 127.0);
  CHECK(i8.get(1) == -128.0);
  CHECK_THROWS_AS(i8.set(0, 128), cs::UsageError);
  CHECK_THROWS_AS(i8.set(0, -129), cs::UsageError);
  CHECK(i8.get(0) == 127.0);  // a refused value leaves the element alone

  Tensor u8 = Tensor::host(DType::uint8, 2);
  CHECK_THROWS_AS(u8.set(0, -1), cs::UsageError);
  CHECK_THROWS_AS(u8.set(0, 256), cs::UsageError);
  CHECK_THROWS_AS(u8.fill(300), cs::UsageError);
  CHECK(u8.get(0) == 0.0);

  Tensor i32 = Tensor::host(DType::int32, 1);
  CHECK_THROWS_AS(i32.set(0, 7.9), cs::UsageError);  // not an integer
  CHECK_THROWS_AS(i32.set(0, 2147483648.0), cs::UsageError);
  CHECK_THROWS_AS(i32.set(0, std::nan("")), cs::UsageError);
  CHECK_THROWS_AS(i32.set(0, INFINITY), cs::UsageError);

  Tensor f32 = Tensor::host(DType::float32, 1);
  f32.set(0, 7.9);  // floats take fractions
  CHECK(f32.get(0) == static_cast<double>(7.9f));
}

// Regression: the upper bound once compared against double(max), which rounds up to 2^63/2^64
// for int64/uint64 and let exactly those values through to an undefined conversion.
TEST_CASE("Tensor set refuses 2^63 for int64 and 2^64 for uint64", "[tensor]") {
  Tensor i64 = Tensor::host(DType::int64, 1);
  i64.set(0, 9223372036854774784.0);  // the largest double below 2^63 fits
  CHECK(static_cast<const int64_t*>(i64.data())[0] == INT64_C(9223372036854774784));
  CHECK_THROWS_AS(i64.set(0, 9223372036854775808.0), cs::UsageError);   // 2^63
  CHECK_THROWS_AS(i64.set(0, -9223372036854777856.0), cs::UsageError);  // below -2^63
  i64.set(0, -9223372036854775808.0);                                   // -2^63 is INT64_MIN: fits
  CHECK(static_cast<const int64_t*>(i64.data())[0] == INT64_MIN);

  Tensor u64 = Tensor::host(DType::uint64, 1);
  CHECK_THROWS_AS(u64.set(0, 18446744073709551616.0), cs::UsageError);  // 2^64
  CHECK_THROWS_AS(u64.fill(18446744073709551616.0), cs::UsageError);
}

TEST_CASE("Tensor::slice shares storage and is range checked", "[tensor]") {
  Tensor t = Tensor::host(DType::int32, 10);
  for (size_t k = 0; k < 10; ++k) t.set(k, static_cast<double>(k));

  Tensor s = t.slice(3, 4);
  CHECK(s.count() == 4);
  CHECK(s.dtype() == DType::int32);
  CHECK(s.data() == static_cast<char*>(t.data()) + 3 * sizeof(int32_t));
  CHECK(s.get(0) == 3.0);
  CHECK(s.get(3) == 6.0);
  s.set(1, 99);  // writes through to the parent
  CHECK(t.get(4) == 99.0);
  t.set(6, -1);  // and the other way
  CHECK(s.get(3) == -1.0);
  s.fill(5);  // only the view
  CHECK(t.get(2) == 2.0);
  CHECK(t.get(3) == 5.0);
  CHECK(t.get(6) == 5.0);
  CHECK(t.get(7) == 7.0);

  Tensor ss = s.slice(1, 2);  // a slice of a slice is relative to the slice
  CHECK(ss.data() == static_cast<char*>(t.data()) + 4 * sizeof(int32_t));
  CHECK_THROWS_AS(s.get(4), cs::UsageError);  // range checked against the view, not the parent

  CHECK(t.slice(0, 10).count() == 10);
  CHECK(t.slice(10, 0).count() == 0);
  CHECK_THROWS_AS(t.slice(0, 11), cs::UsageError);
  CHECK_THROWS_AS(t.slice(11, 0), cs::UsageError);
  CHECK_THROWS_AS(t.slice(8, 3), cs::UsageError);
  CHECK_THROWS_AS(t.slice(5, SIZE_MAX), cs::UsageError);  // first + count wraps around
  CHECK_THROWS_AS(s.slice(2, 3), cs::UsageError);         // inside the parent, outside the view

  Tensor keep;
  {
    Tensor owner = Tensor::host(DType::float32, 8);
    owner.fill(4);
    keep = owner.slice(2, 2);
  }
  CHECK(keep.get(1) == 4.0);  // the view keeps the storage alive
}

TEST_CASE("Tensor::host refuses a too-large allocation before allocating", "[tensor]") {
  REQUIRE(cs::host_memory_available() > 0);  // Linux: MemAvailable is known

  // The --wrap counter works: a normal tensor goes through aligned_alloc.
  const uint64_t before_ok = g_aligned_alloc_calls.load();
  const Tensor small = Tensor::host(DType::uint8, 100);
  CHECK(g_aligned_alloc_calls.load() == before_ok + 1);

  const uint64_t before = g_aligned_alloc_calls.load();
  CHECK_THROWS_AS(Tensor::host(DType::uint8, size_t{1} << 60), cs::InputError);
  CHECK_THROWS_AS(Tensor::host(DType::float64, size_t{1} << 58), cs::InputError);
  CHECK_THROWS_AS(Tensor::host(DType::float64, SIZE_MAX), cs::InputError);  // bytes overflow
  CHECK_THROWS_AS(Tensor::host(DType::int32, SIZE_MAX / 2), cs::InputError);
  CHECK(g_aligned_alloc_calls.load() == before);
  try {
    (void)Tensor::host(DType::uint8, size_t{1} << 60);
  } catch (const cs::InputError& e) {
    CHECK(e.code() == cs::ExitCode::bad_input);
  }
}

TEST_CASE("make_op: a valid allreduce on a self communicator", "[op]") {
  cs::SelfCommunicator comm;
  Tensor send = Tensor::host(DType::float32, 16), recv = Tensor::host(DType::float32, 16);
  const cs::Op op = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::sum);
  CHECK(op.coll == Collective::allreduce);
  CHECK(op.dtype == DType::float32);
  CHECK(op.count == 16);
  CHECK(op.nranks == 1);
  CHECK(op.send == send.data());
  CHECK(op.recv == recv.data());
  CHECK(op.bytes() == 64);

  send.fill(3);
  const uint64_t seq = comm.seq();
  comm.execute(op);
  CHECK(comm.seq() == seq + 1);
  for (size_t i = 0; i < 16; ++i) CHECK(recv.get(i) == 3.0);  // one rank: the sum is its input

  // avg is a float reduction; an explicit count smaller than the tensors is accepted.
  const cs::Op avg = cs::make_op(comm, Collective::allreduce, send, recv, ReduceOp::avg, 0, -1, -1, 4);
  CHECK(avg.count == 4);
  CHECK(avg.bytes() == 16);
}

TEST_CASE("make_op derives the per-call count the way each collective shapes its buffers", "[op]") {
  cs::SelfCommunicator comm;  // one rank: per-rank and total counts coincide
  Tensor a = Tensor::host(DType::int64, 12), b = Tensor::host(DType::int64, 12);
  for (Collective c : cs::kBenchCollectives) {
    INFO(cs::collective_name(c));
    const cs::Op op = cs::make_op(comm, c, a, b, ReduceOp::sum, 0, 0, 0);
    CHECK(op.count == 12);
    CHECK(op.bytes() == 96);
  }
}

TEST_CASE("make_op rejects bad operations with a message naming the operation", "[op]") {
  cs::SelfCommunicator comm;
  const Tensor f32 = Tensor::host(DType::float32, 8);
  const Tensor f32_small = Tensor::host(DType::float32, 4);
  const Tensor i32 = Tensor::host(DType::int32, 8);

  SECTION("mismatched dtypes") {
    const std::string msg = make_op_error(comm, Collective::allreduce, f32, i32, ReduceOp::sum);
    CHECK_THAT(msg, Catch::Contains("allreduce"));
    CHECK_THAT(msg, Catch::Contains("float32"));
    CHECK_THAT(msg, Catch::Contains("int32"));
  }
  SECTION("a receive buffer too small") {
    const std::string msg = make_op_error(comm, Collective::allreduce, f32, f32_small, ReduceOp::sum);
    CHECK_THAT(msg, Catch::Contains("allreduce"));
    CHECK_THAT(make_op_error(comm, Collective::broadcast, f32, f32_small, ReduceOp::sum, 0),
               Catch::Contains("broadcast"));
  }
  SECTION("a send buffer too small for an explicit count") {
    const std::string msg = make_op_error(comm, Collective::allgather, f32_small, f32, ReduceOp::sum, 0, -1, -1, 8);
    CHECK_THAT(msg, Catch::Contains("allgather"));
  }
  SECTION("root out of range") {
    CHECK_THAT(make_op_error(comm, Collective::broadcast, f32, f32, ReduceOp::sum, 1), Catch::Contains("broadcast"));
    CHECK_THAT(make_op_error(comm, Collective::reduce, f32, f32, ReduceOp::sum, -1), Catch::Contains("reduce"));
    CHECK_THAT(make_op_error(comm, Collective::gather, f32, f32, ReduceOp::sum, 2), Catch::Contains("gather"));
    CHECK_THAT(make_op_error(comm, Collective::scatter, f32, f32, ReduceOp::sum, 1), Catch::Contains("scatter"));
  }
  SECTION("peers out of range") {
    CHECK_THAT(make_op_error(comm, Collective::sendrecv, f32, f32, ReduceOp::sum, 0, 1, 0),
               Catch::Contains("sendrecv"));
    CHECK_THAT(make_op_error(comm, Collective::sendrecv, f32, f32, ReduceOp::sum, 0, 0, -1),
               Catch::Contains("sendrecv"));
    CHECK_THAT(make_op_error(comm, Collective::send, f32, Tensor(), ReduceOp::sum, 0, 3), Catch::Contains("send"));
  }
  SECTION("missing tensors") {
    CHECK_THAT(make_op_error(comm, Collective::allreduce, Tensor(), f32, ReduceOp::sum), Catch::Contains("allreduce"));
    CHECK_THAT(make_op_error(comm, Collective::allgather, f32, Tensor(), ReduceOp::sum), Catch::Contains("allgather"));
  }
}

// Regression: the avg-on-integer error once lacked the "allreduce on communicator" prefix.
TEST_CASE("make_op rejects avg on an integer dtype, naming the operation", "[op]") {
  cs::SelfCommunicator comm;
  const Tensor i32 = Tensor::host(DType::int32, 8), i32b = Tensor::host(DType::int32, 8);
  const std::string msg = make_op_error(comm, Collective::allreduce, i32, i32b, ReduceOp::avg);
  CHECK_THAT(msg, Catch::Contains("avg"));
  CHECK_THAT(msg, Catch::Contains("int32"));
  CHECK_THAT(msg, Catch::Contains("allreduce"));
  CHECK_THAT(make_op_error(comm, Collective::reduce_scatter, i32, i32b, ReduceOp::avg),
             Catch::Contains("reduce_scatter"));
  CHECK_THAT(make_op_error(comm, Collective::reduce, i32, i32b, ReduceOp::avg, 0), Catch::Contains("reduce"));
  // Non-reducing collectives ignore the reduction; float dtypes accept avg.
  CHECK_NOTHROW(cs::make_op(comm, Collective::broadcast, i32, i32b, ReduceOp::avg, 0));
  const Tensor f = Tensor::host(DType::float64, 8), g = Tensor::host(DType::float64, 8);
  CHECK_NOTHROW(cs::make_op(comm, Collective::allreduce, f, g, ReduceOp::avg));
}

TEST_CASE("SelfCommunicator: send/recv to itself through the mailbox", "[op]") {
  cs::SelfCommunicator comm;
  Tensor out = Tensor::host(DType::int32, 4), in = Tensor::host(DType::int32, 4);
  for (size_t i = 0; i < 4; ++i) out.set(i, static_cast<double>(10 + i));
  const cs::Op s = cs::make_op(comm, Collective::send, out, Tensor(), ReduceOp::sum, 0, 0);
  const cs::Op r = cs::make_op(comm, Collective::recv, Tensor(), in, ReduceOp::sum, 0, 0);
  CHECK(r.count == 4);
  comm.execute(s);
  out.fill(0);  // the message was copied at send time
  comm.execute(r);
  for (size_t i = 0; i < 4; ++i) CHECK(in.get(i) == static_cast<double>(10 + i));
  try {
    comm.execute(r);  // nothing left to receive: an error, not a hang
    FAIL("no exception");
  } catch (const cs::Error& e) {
    CHECK(e.code() == cs::ExitCode::runtime);
  }
  CHECK(comm.seq() == 3);
}
