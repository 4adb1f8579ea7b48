// JNI glue between io.jcomm.cpu.gloo.internal.GlooNative and Debian's libgloo (tcp transport).
//
// Rules this file follows (see cpu-group/README.md):
//  * Every entry point catches every C++ exception and turns it into a Java
//    GlooNativeException(kind, peerRank, message); nothing unwinds into the JVM.
//  * Arguments were validated in Java; they are re-checked here (buffer capacity, ranks, handle)
//    and a failed check becomes KIND_ARGUMENT instead of undefined behaviour.
//  * The Java side guarantees that a handle is not destroyed while a call uses it
//    (io.jcomm.cpu.gloo.internal.NativeHandle); abort() may run concurrently with an operation.
//  * Rendezvous goes through a gloo::rendezvous::Store subclass that calls back into a Java
//    GlooStoreBridge; a Java exception raised there is carried through gloo as a C++ exception and
//    re-thrown unchanged at the JNI boundary.

#include <jni.h>

#include "io_jcomm_cpu_gloo_internal_GlooNative.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <deque>
#include <condition_variable>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// ---- constants shared with Java: the @Native constants of GlooNative, from its javac -h header ----
#define JCOMM_GLOO_CONST(name) io_jcomm_cpu_gloo_internal_GlooNative_##name

constexpr jint KIND_IO = JCOMM_GLOO_CONST(KIND_IO);              // connection closed/reset: a peer failed
constexpr jint KIND_TIMEOUT = JCOMM_GLOO_CONST(KIND_TIMEOUT);    // gloo timed out
constexpr jint KIND_ENFORCE = JCOMM_GLOO_CONST(KIND_ENFORCE);    // gloo::EnforceNotMet (misuse / internal invariant)
constexpr jint KIND_MISMATCH = JCOMM_GLOO_CONST(KIND_MISMATCH);  // argument check found inconsistent arguments
constexpr jint KIND_CLOSED = JCOMM_GLOO_CONST(KIND_CLOSED);      // a peer closed the group cleanly (goodbye)
constexpr jint KIND_OTHER = JCOMM_GLOO_CONST(KIND_OTHER);        // any other C++ exception
constexpr jint KIND_ARGUMENT = JCOMM_GLOO_CONST(KIND_ARGUMENT);  // native-side validation failed

constexpr int DT_F16 = JCOMM_GLOO_CONST(DT_F16), DT_BF16 = JCOMM_GLOO_CONST(DT_BF16),
              DT_F32 = JCOMM_GLOO_CONST(DT_F32), DT_F64 = JCOMM_GLOO_CONST(DT_F64),
              DT_I8 = JCOMM_GLOO_CONST(DT_I8), DT_U8 = JCOMM_GLOO_CONST(DT_U8),
              DT_I32 = JCOMM_GLOO_CONST(DT_I32), DT_I64 = JCOMM_GLOO_CONST(DT_I64),
              DT_BOOL = JCOMM_GLOO_CONST(DT_BOOL);
constexpr int OP_SUM = JCOMM_GLOO_CONST(REDOP_SUM), OP_PROD = JCOMM_GLOO_CONST(REDOP_PROD),
              OP_MIN = JCOMM_GLOO_CONST(REDOP_MIN), OP_MAX = JCOMM_GLOO_CONST(REDOP_MAX),
              OP_AVG = JCOMM_GLOO_CONST(REDOP_AVG);

// Operation codes of the argument check descriptor (io.jcomm.cpu.internal.OpCodes, as the tcp backend's).
constexpr uint8_t K_BARRIER = JCOMM_GLOO_CONST(OP_BARRIER), K_BROADCAST = JCOMM_GLOO_CONST(OP_BROADCAST),
                  K_ALLREDUCE = JCOMM_GLOO_CONST(OP_ALLREDUCE), K_ALLGATHER = JCOMM_GLOO_CONST(OP_ALLGATHER),
                  K_ALLGATHERV = JCOMM_GLOO_CONST(OP_ALLGATHERV), K_GATHER = JCOMM_GLOO_CONST(OP_GATHER),
                  K_SCATTER = JCOMM_GLOO_CONST(OP_SCATTER), K_REDUCE_SCATTER = JCOMM_GLOO_CONST(OP_REDUCESCATTER),
                  K_ALLTOALL = JCOMM_GLOO_CONST(OP_ALLTOALL), K_ALLTOALLV = JCOMM_GLOO_CONST(OP_ALLTOALLV);

// Slot prefixes outside gloo's own (0x01..0x08).
constexpr uint8_t kCheckSlotPrefix = 0xA5;
constexpr uint8_t kP2pHeaderSlotPrefix = 0xA6;
constexpr uint8_t kGoodbyeSlotPrefix = 0xA7;
constexpr uint64_t kGoodbyeMagic = 0x6579622d6d6d6f63ULL;  // "comm-bye"


// ---- JNI globals (set once in JNI_OnLoad, read-only afterwards) ----

JavaVM* g_vm = nullptr;
jclass g_exClass = nullptr;        // GlooNativeException
jmethodID g_exCtor = nullptr;      // (IILjava/lang/String;)V
jmethodID g_bridgeSet = nullptr;   // set(String, byte[])
jmethodID g_bridgeGet = nullptr;   // get(String) -> byte[]
jmethodID g_bridgeWait = nullptr;  // await(String[], long)
jclass g_stringClass = nullptr;

// A C++ error that should become a GlooNativeException of a given kind.
struct NativeError : std::runtime_error {
  NativeError(jint k, const std::string& m, int peer = -1) : std::runtime_error(m), kind(k), peerRank(peer) {}
  jint kind;
  int peerRank;
};

// A Java exception raised in a store callback, carried through gloo's frames.
struct JavaError : std::exception {
  explicit JavaError(jthrowable globalRef) : ref(globalRef) {}
  jthrowable ref;  // global reference, released by whoever re-throws it
  const char* what() const noexcept override { return "Java exception in store callback"; }
};

// Gives access to an attached JNIEnv for the current thread; attaches (as daemon) when needed and
// detaches on destruction if it attached.
class JniEnv {
 public:
  JniEnv() {
    if (g_vm->GetEnv(reinterpret_cast<void**>(&env_), JNI_VERSION_1_8) == JNI_EDETACHED) {
      if (g_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env_), nullptr) != JNI_OK) {
        throw NativeError(KIND_OTHER, "could not attach thread to the JVM");
      }
      attached_ = true;
    }
  }
  ~JniEnv() {
    if (attached_) {
      g_vm->DetachCurrentThread();
    }
  }
  JNIEnv* operator->() const { return env_; }
  JNIEnv* get() const { return env_; }

 private:
  JNIEnv* env_ = nullptr;
  bool attached_ = false;
};

class LocalFrame {
 public:
  LocalFrame(JNIEnv* env, jint capacity) : env_(env) {
    if (env_->PushLocalFrame(capacity) != 0) {
      throw NativeError(KIND_OTHER, "out of JNI local references");
    }
  }
  ~LocalFrame() { env_->PopLocalFrame(nullptr); }

 private:
  JNIEnv* env_;
};

// Converts a pending Java exception into a JavaError (the exception is cleared in the JVM).
void rethrowPendingJava(JNIEnv* env) {
  if (env->ExceptionCheck()) {
    jthrowable t = env->ExceptionOccurred();
    env->ExceptionClear();
    jthrowable g = static_cast<jthrowable>(env->NewGlobalRef(t));
    env->DeleteLocalRef(t);
    throw JavaError(g);
  }
}

// ---- the rendezvous store: calls back into Java ----

class JavaStore : public gloo::rendezvous::Store {
 public:
  JavaStore(JNIEnv* env, jobject bridge) : bridge_(env->NewGlobalRef(bridge)) {}

  ~JavaStore() override {
    try {
      JniEnv env;
      env->DeleteGlobalRef(bridge_);
    } catch (...) {
      // cannot attach: the reference is leaked rather than crashing
    }
  }

  void set(const std::string& key, const std::vector<char>& data) override {
    JniEnv env;
    LocalFrame frame(env.get(), 8);
    jstring k = env->NewStringUTF(key.c_str());
    rethrowPendingJava(env.get());
    jbyteArray v = env->NewByteArray(static_cast<jsize>(data.size()));
    rethrowPendingJava(env.get());
    env->SetByteArrayRegion(v, 0, static_cast<jsize>(data.size()), reinterpret_cast<const jbyte*>(data.data()));
    env->CallVoidMethod(bridge_, g_bridgeSet, k, v);
    rethrowPendingJava(env.get());
    seen_[key] = data;
  }

  std::vector<char> get(const std::string& key) override {
    JniEnv env;
    LocalFrame frame(env.get(), 8);
    jstring k = env->NewStringUTF(key.c_str());
    rethrowPendingJava(env.get());
    auto v = static_cast<jbyteArray>(env->CallObjectMethod(bridge_, g_bridgeGet, k));
    rethrowPendingJava(env.get());
    if (v == nullptr) {
      throw NativeError(KIND_OTHER, "store returned no value for " + key);
    }
    jsize n = env->GetArrayLength(v);
    std::vector<char> out(static_cast<size_t>(n));
    env->GetByteArrayRegion(v, 0, n, reinterpret_cast<jbyte*>(out.data()));
    rethrowPendingJava(env.get());
    seen_[key] = out;
    return out;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, std::chrono::milliseconds(-1)); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    JniEnv env;
    LocalFrame frame(env.get(), static_cast<jint>(keys.size()) + 8);
    jobjectArray arr = env->NewObjectArray(static_cast<jsize>(keys.size()), g_stringClass, nullptr);
    rethrowPendingJava(env.get());
    for (size_t i = 0; i < keys.size(); i++) {
      jstring k = env->NewStringUTF(keys[i].c_str());
      rethrowPendingJava(env.get());
      env->SetObjectArrayElement(arr, static_cast<jsize>(i), k);
      env->DeleteLocalRef(k);
    }
    env->CallVoidMethod(bridge_, g_bridgeWait, arr, static_cast<jlong>(timeout.count()));
    rethrowPendingJava(env.get());
  }

  // Values this process set or read, by key: connectFullMesh's "<rank>" entries hold the
  // listening addresses of every pair.
  const std::map<std::string, std::vector<char>>& seen() const { return seen_; }

 private:
  jobject bridge_;
  std::map<std::string, std::vector<char>> seen_;
};

// ---- the sockets of a context's pairs ----
//
// Debian's libgloo-dev lacks gloo/common/memory.h, so gloo/transport/tcp/pair.h cannot be
// included and tcp::Pair's abort hook is out of reach. We find each pair's socket instead: after
// the full mesh is connected, pair->address() is the local end of the pair's connected socket,
// which identifies it among this process's sockets. shutdown(2) on it makes gloo's event loop see
// end-of-file and fail every operation pending on the pair ("Connection closed by peer"), exactly
// as if the peer had died; the peer sees end-of-file as well. The socket's inode is recorded and
// checked before shutdown, so a descriptor number gloo closed and the process reused is never
// touched. The peer's address is formatted by gloo's own tcp::Address::str(), the text gloo's
// error messages contain, so that an error can be mapped to the peer's rank.

struct PairSocket {
  int fd = -1;
  ino_t inode = 0;
  std::string peerName;       // remote end of the socket
  std::string publishedName;  // the peer's published listening address
};

bool sameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) {
    return false;
  }
  if (a.ss_family == AF_INET) {
    auto* x = reinterpret_cast<const sockaddr_in*>(&a);
    auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && std::memcmp(&x->sin_addr, &y->sin_addr, sizeof(in_addr)) == 0;
  }
  if (a.ss_family == AF_INET6) {
    auto* x = reinterpret_cast<const sockaddr_in6*>(&a);
    auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port && std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// The listening address (as gloo published it in the store) of the pair between ranks `owner`
// and `other`, taken from owner's "<owner>" entry; false if unknown.
bool publishedAddress(const std::map<std::string, std::vector<char>>& seen, int owner, int other, int size,
                      sockaddr_storage* out) {
  auto it = seen.find(std::to_string(owner));
  if (it == seen.end() || size < 2 || it->second.size() % static_cast<size_t>(size - 1) != 0) {
    return false;
  }
  size_t each = it->second.size() / static_cast<size_t>(size - 1);
  size_t index = static_cast<size_t>(other < owner ? other : other - 1);
  try {
    std::vector<char> bytes(it->second.begin() + each * index, it->second.begin() + each * (index + 1));
    *out = gloo::transport::tcp::Address(bytes).getSockaddr();
    return true;
  } catch (...) {
    return false;
  }
}

// Finds the connected socket of every pair of ctx. A socket belongs to pair i when its local end
// is the pair's address and either its remote end is the peer's published listening address (we
// connected) or its local end is our published listening address (we accepted). Local ends alone
// are not unique: Linux shares an ephemeral port among connections to different destinations.
std::vector<PairSocket> locatePairSockets(const std::shared_ptr<gloo::rendezvous::Context>& ctx, int rank, int size,
                                          const std::map<std::string, std::vector<char>>& seen) {
  std::vector<PairSocket> out(static_cast<size_t>(size));
  std::vector<sockaddr_storage> local(static_cast<size_t>(size));
  std::vector<sockaddr_storage> ourListen(static_cast<size_t>(size));
  std::vector<sockaddr_storage> theirListen(static_cast<size_t>(size));
  std::vector<bool> known(static_cast<size_t>(size), false);
  std::vector<int> matches(static_cast<size_t>(size), 0);
  for (int i = 0; i < size; i++) {
    if (i == rank || !ctx->getPair(i)) {
      continue;
    }
    gloo::transport::tcp::Address a(ctx->getPair(i)->address().bytes());
    local[i] = a.getSockaddr();
    known[i] = publishedAddress(seen, rank, i, size, &ourListen[i]) &&
               publishedAddress(seen, i, rank, size, &theirListen[i]);
  }
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return out;
  }
  const int self = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == self || fd < 0) {
      continue;
    }
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      continue;
    }
    for (int i = 0; i < size; i++) {
      if (!known[i] || !sameEndpoint(ss, local[i])) {
        continue;
      }
      sockaddr_storage ps{};
      socklen_t plen = sizeof(ps);
      if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&ps), &plen) != 0) {
        continue;
      }
      if (!sameEndpoint(ps, theirListen[i]) && !sameEndpoint(ss, ourListen[i])) {
        continue;
      }
      matches[i]++;
      out[i].fd = static_cast<int>(fd);
      out[i].inode = st.st_ino;
      out[i].peerName = gloo::transport::tcp::Address(reinterpret_cast<const sockaddr*>(&ps), plen).str();
    }
  }
  closedir(dir);
  for (int i = 0; i < size; i++) {
    if (matches[i] != 1) {
      out[i] = PairSocket();  // not found or ambiguous: leave it alone
    }
    if (known[i]) {
      // gloo names a pair's peer by the remote end of its socket, or by the address it connected
      // to when the peer's connection was accepted before the pair's connect() ran.
      out[i].publishedName = gloo::transport::tcp::Address(theirListen[i]).str();
    }
  }
  return out;
}

// ---- the communicator: one gloo context per device ----

struct Comm {
  Comm(int r, int s, int d, bool th) : rank(r), size(s), ndev(d), torchHalf(th), contexts(d), devices(d), sockets(d) {}
  ~Comm() {
    stopSends();
    nextCheck.reset();
    unusedChecks.clear();
    goodbyes.clear();  // pending receives may be dropped: gloo holds weak references
    contexts.clear();  // pairs first (they unregister from their device's event loop) ...
    devices.clear();   // ... then the devices, whose destructors join the loop threads
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  const int rank;
  const int size;
  const int ndev;
  // F16 reductions as PyTorch's gloo does them: in half precision, rounded at every step (the
  // payload on the wire is half, so PyTorch ranks can take part); otherwise widened to float.
  const bool torchHalf;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts;
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  std::vector<std::vector<PairSocket>> sockets;  // [device][rank]
  std::mutex mutex;                              // guards the three vectors while connecting
  std::vector<char> scratch;  // reduction scratch (calls are serialised by the Java side)

  // Argument check: the receives of the next collective's descriptors, posted in advance so that
  // every rank's descriptor goes out at once (gloo sends only to a posted receive).
  struct PostedCheck {
    uint32_t tag = 0;
    std::vector<char> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  };
  std::unique_ptr<PostedCheck> nextCheck;
  // Posted receives that were never used (only after a failure): kept until the end, because a
  // buffer with a posted receive must not be freed while data for it may still arrive.
  std::vector<std::unique_ptr<PostedCheck>> unusedChecks;

  // ---- buffered sends: send() copies the payload, posts it and returns; a reaper thread waits
  // for the receivers (gloo transmits only once the receiver has posted its recv) ----
  struct PendingSend {
    std::vector<uint8_t> payload;
    uint64_t header = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> headerBuf;  // with the argument check only
    std::unique_ptr<gloo::transport::UnboundBuffer> dataBuf;
    std::chrono::steady_clock::time_point deadline;
  };
  std::mutex sendMutex;
  std::condition_variable sendCv;
  std::deque<std::unique_ptr<PendingSend>> sends;
  // Payload buffers of completed sends, kept for the next sends: a fresh multi-megabyte vector is
  // a fresh mmap whose every page faults in during the copy. Bounded in count and bytes.
  std::vector<std::vector<uint8_t>> spare;
  static constexpr size_t kSpareCount = 4;
  static constexpr size_t kSpareBytes = size_t{256} << 20;
  gloo::transport::UnboundBuffer* waitingOn = nullptr;  // the buffer the reaper waits on
  bool stopping = false;
  std::thread reaper;

  // The first failure of a buffered send; reported by the next call on this communicator.
  bool failed = false;
  jint failedKind = 0;
  int failedPeer = -1;
  std::string failedMessage;

  void enqueue(std::unique_ptr<PendingSend> ps) {
    std::lock_guard<std::mutex> lock(sendMutex);
    sends.push_back(std::move(ps));
    if (!reaper.joinable()) {
      reaper = std::thread([this] { reap(); });
    }
    sendCv.notify_all();
  }

  // A payload buffer of at least `bytes` capacity from the spares, or an empty one.
  std::vector<uint8_t> takeSpare(size_t bytes) {
    std::lock_guard<std::mutex> lock(sendMutex);
    for (size_t i = 0; i < spare.size(); i++) {
      if (spare[i].capacity() >= bytes) {
        std::vector<uint8_t> v = std::move(spare[i]);
        spare.erase(spare.begin() + static_cast<std::ptrdiff_t>(i));
        return v;
      }
    }
    return {};
  }

  // Keeps a completed send's payload buffer for reuse (sendMutex held).
  void keepSpareLocked(std::vector<uint8_t>&& v) {
    if (v.capacity() == 0) {
      return;
    }
    size_t total = v.capacity();
    for (const auto& b : spare) {
      total += b.capacity();
    }
    if (spare.size() < kSpareCount && total <= kSpareBytes) {
      spare.push_back(std::move(v));
    }
  }

  // Throws the failure of an earlier buffered send, if any.
  void throwIfSendFailed() {
    std::lock_guard<std::mutex> lock(sendMutex);
    if (failed) {
      throw NativeError(failedKind, "an earlier send failed: " + failedMessage, failedPeer);
    }
  }

  // Waits up to timeout until every buffered send was received (or one failed).
  bool flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(sendMutex);
    return sendCv.wait_for(lock, timeout, [this] { return sends.empty() || failed || stopping; }) && !failed;
  }

  void stopSends() {
    {
      std::lock_guard<std::mutex> lock(sendMutex);
      stopping = true;
      if (waitingOn != nullptr) {
        waitingOn->abortWaitSend();
      }
      sendCv.notify_all();
    }
    if (reaper.joinable()) {
      reaper.join();
    }
    std::lock_guard<std::mutex> lock(sendMutex);
    sends.clear();  // unbound buffers may be destroyed with operations pending (gloo holds weak references)
  }

  // false when stopping (the wait was aborted)
  bool waitSent(gloo::transport::UnboundBuffer* b, std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> lock(sendMutex);
      if (stopping) {
        return false;
      }
      waitingOn = b;
    }
    // Cleared however waitSend returns: a timeout throws, and the buffer is freed right after.
    struct Clear {
      Comm* c;
      ~Clear() {
        std::lock_guard<std::mutex> lock(c->sendMutex);
        c->waitingOn = nullptr;
      }
    } clear{this};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    bool done = b->waitSend(std::max(std::chrono::milliseconds(1), left));
    std::lock_guard<std::mutex> lock(sendMutex);
    return done && !stopping;
  }

  // ---- clean close: before closing its connections a rank sends a "goodbye" to every peer, on a
  // slot each rank keeps a receive posted for; a connection that ends after a goodbye is a clean
  // close (CommClosedException), one that ends without is a peer failure ----
  struct Goodbye {
    uint64_t data = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    bool checked = false;
    bool seen = false;
  };
  std::vector<std::vector<std::unique_ptr<Goodbye>>> goodbyes;  // [device][rank], when enabled
  std::mutex goodbyeMutex;

  void expectGoodbyes(int dev, const std::shared_ptr<gloo::rendezvous::Context>& c) {
    std::vector<std::unique_ptr<Goodbye>> g(static_cast<size_t>(size));
    auto slot = static_cast<uint64_t>(gloo::Slot::build(kGoodbyeSlotPrefix, 0));
    for (int i = 0; i < size; i++) {
      if (i != rank) {
        g[i] = std::make_unique<Goodbye>();
        g[i]->buf = c->createUnboundBuffer(&g[i]->data, sizeof(g[i]->data));
        g[i]->buf->recv(i, slot);
      }
    }
    std::lock_guard<std::mutex> lock(goodbyeMutex);
    if (goodbyes.size() < static_cast<size_t>(ndev)) {
      goodbyes.resize(static_cast<size_t>(ndev));
    }
    goodbyes[dev] = std::move(g);
  }

  // Whether `peer` (or any peer, for -1) said goodbye before its connection ended. Only asked once
  // a connection failed: the check may close the context (a wait that times out does).
  bool saidGoodbye(int peer) {
    std::lock_guard<std::mutex> lock(goodbyeMutex);
    for (auto& dev : goodbyes) {
      for (int i = 0; i < static_cast<int>(dev.size()); i++) {
        Goodbye* g = dev[i].get();
        if (g == nullptr || (peer >= 0 && i != peer)) {
          continue;
        }
        if (!g->checked) {
          g->checked = true;
          try {
            g->seen = g->buf->waitRecv(nullptr, std::chrono::milliseconds(1)) && g->data == kGoodbyeMagic;
          } catch (...) {
            g->seen = false;
          }
        }
        if (g->seen) {
          return true;
        }
      }
    }
    return false;
  }

  // Sends a goodbye to every peer on every device and waits (bounded) until they are written.
  void sayGoodbye(std::chrono::milliseconds budget) {
    static const uint64_t magic = kGoodbyeMagic;
    auto end = std::chrono::steady_clock::now() + budget;
    auto slot = static_cast<uint64_t>(gloo::Slot::build(kGoodbyeSlotPrefix, 0));
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sent;
    {
      std::lock_guard<std::mutex> lock(goodbyeMutex);
      if (goodbyes.empty()) {
        return;  // not enabled
      }
    }
    for (auto& c : contexts) {
      if (!c) {
        continue;
      }
      for (int i = 0; i < size; i++) {
        if (i == rank) {
          continue;
        }
        try {
          auto b = c->createUnboundBuffer(const_cast<uint64_t*>(&magic), sizeof(magic));
          b->send(i, slot);
          sent.push_back(std::move(b));
        } catch (...) {
          // connection already gone
        }
      }
    }
    for (auto& b : sent) {
      try {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        b->waitSend(std::max(std::chrono::milliseconds(1), left));
      } catch (...) {
        // timed out (the context is closed by gloo) or the connection failed: we are closing anyway
      }
    }
  }

  void reap();
  void recordSendFailure(jint kind, int peer, const std::string& msg) {
    {
      std::lock_guard<std::mutex> lock(sendMutex);
      if (!failed) {
        failed = true;
        failedKind = kind;
        failedPeer = peer;
        failedMessage = msg;
      }
      sendCv.notify_all();
    }
    abortAll();
  }

  const std::shared_ptr<gloo::rendezvous::Context>& ctx(int dev) const {
    if (dev < 0 || dev >= ndev || !contexts[dev]) {
      throw NativeError(KIND_ARGUMENT, "device " + std::to_string(dev) + " not connected");
    }
    return contexts[dev];
  }

  // Shuts down every pair socket of every connected context: blocked operations wake up and fail,
  // peers see the connections close. Safe to call concurrently with an operation.
  void abortAll() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& socks : sockets) {
      for (auto& s : socks) {
        if (s.fd < 0) {
          continue;
        }
        struct stat st {};
        if (fstat(s.fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == s.inode) {
          ::shutdown(s.fd, SHUT_RDWR);
        }
      }
    }
  }

  // The peer rank whose address appears in msg, or -1.
  int peerIn(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& socks : sockets) {
      for (int i = 0; i < static_cast<int>(socks.size()); i++) {
        if (mentions(msg, socks[i].peerName) || mentions(msg, socks[i].publishedName)) {
          return i;
        }
      }
    }
    return -1;
  }

  // True if msg contains name not followed by another digit ("[ip]:80" must not match "[ip]:8080").
  static bool mentions(const std::string& msg, const std::string& name) {
    if (name.empty()) {
      return false;
    }
    for (size_t pos = msg.find(name); pos != std::string::npos; pos = msg.find(name, pos + 1)) {
      size_t end = pos + name.size();
      if (end >= msg.size() || msg[end] < '0' || msg[end] > '9') {
        return true;
      }
    }
    return false;
  }
};

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Kind of a gloo::IoException's message.
jint ioKind(const std::string& msg) {
  if (contains(msg, "Timed out") || contains(msg, "timeout") || contains(msg, "Application timeout")) {
    return KIND_TIMEOUT;
  }
  return KIND_IO;
}

// Kind and peer of a gloo::IoException on comm: a timeout, a clean close of a peer that said
// goodbye, or the failure of a peer (named when its address is in the message).
void classifyIo(Comm* comm, const std::string& msg, jint* kind, int* peer) {
  *kind = ioKind(msg);
  *peer = -1;
  if (*kind == KIND_IO && comm != nullptr) {
    *peer = comm->peerIn(msg);
    if (comm->saidGoodbye(*peer)) {
      *kind = KIND_CLOSED;
    }
  }
}

void Comm::reap() {
  for (;;) {
    PendingSend* ps;
    {
      std::unique_lock<std::mutex> lock(sendMutex);
      sendCv.wait(lock, [this] { return stopping || !sends.empty(); });
      if (stopping) {
        return;
      }
      ps = sends.front().get();
    }
    try {
      bool done = (!ps->headerBuf || waitSent(ps->headerBuf.get(), ps->deadline)) &&
                  waitSent(ps->dataBuf.get(), ps->deadline);
      if (!done) {
        return;  // stopping
      }
    } catch (gloo::IoException& e) {
      std::string msg = e.what();
      jint kind;
      int peer;
      classifyIo(this, msg, &kind, &peer);
      recordSendFailure(kind, peer, msg);
    } catch (std::exception& e) {
      recordSendFailure(KIND_OTHER, -1, e.what());
    } catch (...) {
      recordSendFailure(KIND_OTHER, -1, "unknown C++ exception");
    }
    std::lock_guard<std::mutex> lock(sendMutex);
    if (failed) {
      sends.clear();  // the connections are closed: nothing else will be delivered
    } else if (!sends.empty()) {
      keepSpareLocked(std::move(sends.front()->payload));
      sends.pop_front();
    }
    sendCv.notify_all();
  }
}

Comm* toComm(jlong h) {
  if (h == 0) {
    throw NativeError(KIND_ARGUMENT, "null gloo handle");
  }
  return reinterpret_cast<Comm*>(h);
}

// ---- exceptions to Java ----

void throwJava(JNIEnv* env, jint kind, int peer, const std::string& msg) {
  if (env->ExceptionCheck()) {
    return;
  }
  std::string ascii(msg);
  for (char& c : ascii) {
    if (static_cast<unsigned char>(c) >= 0x80 || c == '\0') {
      c = '?';  // NewStringUTF wants modified UTF-8; gloo's messages are ASCII anyway
    }
  }
  jstring m = env->NewStringUTF(ascii.c_str());
  if (m == nullptr) {
    return;  // OutOfMemoryError pending
  }
  auto ex = static_cast<jthrowable>(env->NewObject(g_exClass, g_exCtor, kind, static_cast<jint>(peer), m));
  if (ex != nullptr) {
    env->Throw(ex);
  }
}

// Runs fn; converts every C++ exception into a Java exception. After an I/O failure or a timeout
// every pair of every context of the communicator is closed, so that peers blocked on this rank
// fail fast too instead of waiting for their own timeout.
template <typename F>
void guarded(JNIEnv* env, Comm* comm, F&& fn) {
  try {
    fn();
  } catch (JavaError& e) {
    env->Throw(e.ref);
    env->DeleteGlobalRef(e.ref);
  } catch (NativeError& e) {
    // A mismatch is seen by every rank of a collective: nobody is left waiting, and the
    // connections stay open (closing them could reset data a peer has not read yet).
    throwJava(env, e.kind, e.peerRank, e.what());
  } catch (gloo::IoException& e) {
    std::string msg = e.what();
    jint kind;
    int peer;
    classifyIo(comm, msg, &kind, &peer);
    if (comm != nullptr) {
      try {
        if (kind == KIND_CLOSED) {
          comm->sayGoodbye(std::chrono::milliseconds(200));  // a clean close cascades as one
        }
        comm->abortAll();
      } catch (...) {
      }
    }
    throwJava(env, kind, peer, msg);
  } catch (gloo::EnforceNotMet& e) {
    throwJava(env, KIND_ENFORCE, -1, e.what());
  } catch (std::exception& e) {
    throwJava(env, KIND_OTHER, -1, e.what());
  } catch (...) {
    throwJava(env, KIND_OTHER, -1, "unknown C++ exception");
  }
}

// ---- helpers ----

std::chrono::milliseconds ms(jlong timeoutMs) {
  // Java passes >= 1; bound it so that steady_clock arithmetic cannot overflow (30 days).
  const jlong maxMs = 30LL * 24 * 3600 * 1000;
  return std::chrono::milliseconds(std::max<jlong>(1, std::min<jlong>(timeoutMs, maxMs)));
}

// Deadline for a call: the argument check and the operation share the caller's timeout.
struct Deadline {
  explicit Deadline(jlong timeoutMs) : end(std::chrono::steady_clock::now() + ms(timeoutMs)) {}
  std::chrono::milliseconds left() const {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    return std::max(std::chrono::milliseconds(1), d);
  }
  std::chrono::steady_clock::time_point end;
};

uint8_t* address(JNIEnv* env, jobject buf, jlong bytes, const char* what) {
  if (bytes < 0) {
    throw NativeError(KIND_ARGUMENT, std::string(what) + ": negative size");
  }
  if (buf == nullptr) {
    throw NativeError(KIND_ARGUMENT, std::string(what) + ": null buffer");
  }
  void* p = env->GetDirectBufferAddress(buf);
  jlong cap = env->GetDirectBufferCapacity(buf);
  if (p == nullptr && bytes > 0) {
    throw NativeError(KIND_ARGUMENT, std::string(what) + ": not a direct buffer");
  }
  if (cap < bytes) {
    throw NativeError(KIND_ARGUMENT, std::string(what) + ": buffer of " + std::to_string(cap) + " bytes, need " +
                                         std::to_string(bytes));
  }
  return static_cast<uint8_t*>(p);
}

size_t dtypeSize(int dt) {
  switch (dt) {
    case DT_F16:
    case DT_BF16:
      return 2;
    case DT_F32:
    case DT_I32:
      return 4;
    case DT_F64:
    case DT_I64:
      return 8;
    case DT_I8:
    case DT_U8:
    case DT_BOOL:
      return 1;
    default:
      throw NativeError(KIND_ARGUMENT, "unknown dtype code " + std::to_string(dt));
  }
}

void checkRank(const Comm* c, int r, const char* what) {
  if (r < 0 || r >= c->size) {
    throw NativeError(KIND_ARGUMENT, std::string(what) + " rank " + std::to_string(r) + " out of range");
  }
}

// ---- half precision conversions (identical to io.jcomm.api.HalfFloats) ----

inline uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) {
    return bitsf(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    if (mant == 0) {
      return bitsf(sign);
    }
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return sign != 0 ? -v : v;
  }
  return bitsf(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToF16(float value) {
  uint32_t f = fbits(value);
  uint32_t sign = (f >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((f >> 23) & 0xff);
  uint32_t mant = f & 0x7fffff;
  if (exp == 0xff) {
    return static_cast<uint16_t>(sign | 0x7c00 | (mant != 0 ? (0x200 | (mant >> 13)) : 0));
  }
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) {
    return static_cast<uint16_t>(sign | 0x7c00);
  }
  if (e <= 0) {
    if (e < -10) {
      return static_cast<uint16_t>(sign);
    }
    uint32_t m = mant | 0x800000;
    int shift = 14 - e;
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1) != 0)) {
      half++;
    }
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1) != 0)) {
    half++;
  }
  return static_cast<uint16_t>(sign | half);
}

inline float bf16ToFloat(uint16_t b) { return bitsf(static_cast<uint32_t>(b) << 16); }

inline uint16_t floatToBf16(float value) {
  uint32_t f = fbits(value);
  if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu) != 0) {
    return static_cast<uint16_t>((f >> 16) | 0x40);
  }
  uint32_t lsb = (f >> 16) & 1;
  uint32_t rounded = f + 0x7fff + lsb;
  return static_cast<uint16_t>(rounded >> 16);
}

// ---- reductions ----

template <typename T>
T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // promote to at least unsigned int so that uint8/16 products cannot overflow a signed int
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned int)), unsigned int, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

template <typename T>
void redSum(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = wrapAdd(a[i], b[i]);
  }
}

template <typename T>
void redProd(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = wrapMul(a[i], b[i]);
  }
}

// Same semantics as gloo::max / gloo::min (std::max / std::min), so results match torch's gloo.
template <typename T>
void redMax(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = std::max(a[i], b[i]);
  }
}

template <typename T>
void redMin(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = std::min(a[i], b[i]);
  }
}

void boolOr(void* c_, const void* a_, const void* b_, size_t n) {
  auto* c = static_cast<uint8_t*>(c_);
  auto* a = static_cast<const uint8_t*>(a_);
  auto* b = static_cast<const uint8_t*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = (a[i] != 0 || b[i] != 0) ? 1 : 0;
  }
}

void boolAnd(void* c_, const void* a_, const void* b_, size_t n) {
  auto* c = static_cast<uint8_t*>(c_);
  auto* a = static_cast<const uint8_t*>(a_);
  auto* b = static_cast<const uint8_t*>(b_);
  for (size_t i = 0; i < n; i++) {
    c[i] = (a[i] != 0 && b[i] != 0) ? 1 : 0;
  }
}

using RedFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
RedFn reduction(int op) {
  switch (op) {
    case OP_SUM:
    case OP_AVG:
      return &redSum<T>;
    case OP_PROD:
      return &redProd<T>;
    case OP_MIN:
      return &redMin<T>;
    case OP_MAX:
      return &redMax<T>;
    default:
      throw NativeError(KIND_ARGUMENT, "unknown reduce op code " + std::to_string(op));
  }
}

template <typename T>
void allreduceTyped(const std::shared_ptr<gloo::Context>& ctx, uint32_t tag, std::chrono::milliseconds timeout,
                    T* p, size_t n, RedFn fn) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput<T>(p, n);
  o.setReduceFunction(fn);
  o.setTag(tag);
  o.setTimeout(timeout);
  gloo::allreduce(o);
}

template <typename T>
void divideBy(T* p, size_t n, int size) {
  for (size_t i = 0; i < n; i++) {
    if constexpr (std::is_integral_v<T>) {
      p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / size);  // truncates toward zero
    } else {
      p[i] = p[i] / static_cast<T>(size);
    }
  }
}

template <typename T>
void allreduceNative(Comm* c, const std::shared_ptr<gloo::Context>& ctx, uint32_t tag,
                     std::chrono::milliseconds timeout, void* p, size_t n, int op) {
  allreduceTyped<T>(ctx, tag, timeout, static_cast<T*>(p), n, reduction<T>(op));
  if (op == OP_AVG) {
    divideBy<T>(static_cast<T*>(p), n, c->size);
  }
}

float* floatScratch(Comm* c, size_t n) {
  c->scratch.resize(std::max<size_t>(c->scratch.size(), n * sizeof(float)));
  return reinterpret_cast<float*>(c->scratch.data());
}

// In-place all-reduce of n elements at p (dtype dt). f16/bf16 are widened to float, reduced in
// float and rounded back to nearest even.
void allreduceAny(Comm* c, const std::shared_ptr<gloo::Context>& ctx, uint32_t tag,
                  std::chrono::milliseconds timeout, void* p, size_t n, int dt, int op) {
  switch (dt) {
    case DT_F32:
      return allreduceNative<float>(c, ctx, tag, timeout, p, n, op);
    case DT_F64:
      return allreduceNative<double>(c, ctx, tag, timeout, p, n, op);
    case DT_I8:
      return allreduceNative<int8_t>(c, ctx, tag, timeout, p, n, op);
    case DT_U8:
      return allreduceNative<uint8_t>(c, ctx, tag, timeout, p, n, op);
    case DT_I32:
      return allreduceNative<int32_t>(c, ctx, tag, timeout, p, n, op);
    case DT_I64:
      return allreduceNative<int64_t>(c, ctx, tag, timeout, p, n, op);
    case DT_BOOL: {
      RedFn fn;
      switch (op) {
        case OP_SUM:
        case OP_MAX:
          fn = &boolOr;
          break;
        case OP_PROD:
        case OP_MIN:
          fn = &boolAnd;
          break;
        default:
          throw NativeError(KIND_ARGUMENT, "reduce op " + std::to_string(op) + " is not defined for bool");
      }
      return allreduceTyped<uint8_t>(ctx, tag, timeout, static_cast<uint8_t*>(p), n, fn);
    }
    case DT_F16:
      if (c->torchHalf) {
        return allreduceNative<gloo::float16>(c, ctx, tag, timeout, p, n, op);
      }
      [[fallthrough]];
    case DT_BF16: {
      float* f = floatScratch(c, n);
      auto* h = static_cast<uint16_t*>(p);
      bool isF16 = dt == DT_F16;
      for (size_t i = 0; i < n; i++) {
        f[i] = isF16 ? f16ToFloat(h[i]) : bf16ToFloat(h[i]);
      }
      allreduceNative<float>(c, ctx, tag, timeout, f, n, op);
      for (size_t i = 0; i < n; i++) {
        h[i] = isF16 ? floatToF16(f[i]) : floatToBf16(f[i]);
      }
      return;
    }
    default:
      throw NativeError(KIND_ARGUMENT, "unknown dtype code " + std::to_string(dt));
  }
}

// ---- argument check: every rank sends a descriptor of its call to every other rank ----

struct Desc {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t op;
  uint8_t pad;
  int32_t root;
  uint32_t tag;
  uint64_t count;
  uint64_t extra;
};
static_assert(sizeof(Desc) == 32, "descriptor layout");

constexpr uint32_t kDescMagic = 0x6a676c31;  // "jgl1"

const char* kindName(uint8_t k) {
  switch (k) {
    case K_BARRIER:
      return "barrier";
    case K_BROADCAST:
      return "broadcast";
    case K_ALLREDUCE:
      return "allReduce";
    case K_ALLGATHER:
      return "allGather";
    case K_ALLGATHERV:
      return "allGatherV";
    case K_GATHER:
      return "gather";
    case K_SCATTER:
      return "scatter";
    case K_REDUCE_SCATTER:
      return "reduceScatter";
    case K_ALLTOALL:
      return "allToAll";
    case K_ALLTOALLV:
      return "allToAllV";
    default:
      return "?";
  }
}

std::string describe(const Desc& d) {
  std::ostringstream s;
  s << kindName(d.kind) << "(dtype=" << int(d.dtype) << ", count=" << d.count << ", root=" << d.root
    << ", op=" << int(d.op);
  if (d.kind == K_ALLGATHERV) {
    s << ", counts-hash=" << std::hex << d.extra << std::dec;
  }
  s << ")";
  return s.str();
}

// With the argument check on, every rank sends every other rank one fixed-size message per
// collective: its 32-byte descriptor followed by up to kInline bytes of payload. Fixed-size, so
// that ranks that disagree cannot overrun each other's receives. Small collectives (payload of at
// most kInline bytes) are complete after this one exchange: each rank computes the result from
// the messages, in rank order, so every rank gets the same bits. Larger ones then run gloo's
// algorithm.
constexpr size_t kInline = 1024;
constexpr size_t kMsg = sizeof(Desc) + kInline;

// Posts the receives of every peer's message for collective `tag` (on that tag's context).
void postCheck(Comm* c, uint32_t tag) {
  auto pc = std::make_unique<Comm::PostedCheck>();
  pc->tag = tag;
  pc->data.resize(kMsg * static_cast<size_t>(c->size));
  const auto& ctx = c->ctx(static_cast<int>(tag % static_cast<uint32_t>(c->ndev)));
  pc->buf = ctx->createUnboundBuffer(pc->data.data(), pc->data.size());
  auto slot = static_cast<uint64_t>(gloo::Slot::build(kCheckSlotPrefix, tag));
  if (c->nextCheck) {
    c->unusedChecks.push_back(std::move(c->nextCheck));
  }
  try {
    for (int i = 0; i < c->size; i++) {
      if (i != c->rank) {
        pc->buf->recv(i, slot, kMsg * static_cast<size_t>(i), kMsg);
      }
    }
  } catch (...) {
    c->unusedChecks.push_back(std::move(pc));  // some receives may be posted: keep the buffer
    throw;
  }
  c->nextCheck = std::move(pc);
}

// The exchanged messages of one collective: descriptor and inline payload of every rank.
struct Exchanged {
  std::unique_ptr<Comm::PostedCheck> pc;
  const Desc& desc(int r) const { return *reinterpret_cast<const Desc*>(pc->data.data() + kMsg * r); }
  const uint8_t* payload(int r) const {
    return reinterpret_cast<const uint8_t*>(pc->data.data()) + kMsg * static_cast<size_t>(r) + sizeof(Desc);
  }
};

// Every rank sends its message to every other rank and compares the descriptors it gets. The
// receives were posted at the previous collective, so this costs about one one-way latency. It
// synchronises like a barrier: nobody returns before every rank arrived. `payload` (at most
// kInline bytes) travels inline; `perPeer` (scatter) gives each peer its own payload instead.
Exchanged exchange(Comm* c, const std::shared_ptr<gloo::Context>& ctx, const Deadline& dl, const Desc& mine,
                   const uint8_t* payload, size_t bytes, size_t perPeerStride = 0) {
  const int size = c->size;
  const int rank = c->rank;
  if (!c->nextCheck || c->nextCheck->tag != mine.tag) {
    postCheck(c, mine.tag);  // the first collective
  }
  Exchanged ex{std::move(c->nextCheck)};
  auto slot = static_cast<uint64_t>(gloo::Slot::build(kCheckSlotPrefix, mine.tag));
  // Our own message, in our slot of the exchange buffer (nothing is received there).
  uint8_t* own = reinterpret_cast<uint8_t*>(ex.pc->data.data()) + kMsg * static_cast<size_t>(rank);
  std::memset(own, 0, kMsg);
  std::memcpy(own, &mine, sizeof(Desc));
  std::vector<uint8_t> peerMsgs;  // scatter: one message per peer
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sendBufs;
  if (perPeerStride == 0) {
    if (bytes > 0) {
      std::memcpy(own + sizeof(Desc), payload, bytes);
    }
    sendBufs.push_back(ctx->createUnboundBuffer(own, kMsg));
    for (int i = 0; i < size; i++) {
      if (i != rank) {
        sendBufs[0]->send(i, slot);
      }
    }
  } else {
    peerMsgs.assign(kMsg * static_cast<size_t>(size), 0);
    for (int i = 0; i < size; i++) {
      uint8_t* m = peerMsgs.data() + kMsg * static_cast<size_t>(i);
      std::memcpy(m, &mine, sizeof(Desc));
      if (bytes > 0) {
        std::memcpy(m + sizeof(Desc), payload + perPeerStride * static_cast<size_t>(i), bytes);
      }
    }
    std::memcpy(own + sizeof(Desc), peerMsgs.data() + kMsg * static_cast<size_t>(rank) + sizeof(Desc), kInline);
    for (int i = 0; i < size; i++) {
      if (i != rank) {
        sendBufs.push_back(ctx->createUnboundBuffer(peerMsgs.data() + kMsg * static_cast<size_t>(i), kMsg));
        sendBufs.back()->send(i, slot);
      }
    }
  }
  try {
    for (int i = 0; i < size; i++) {
      if (i != rank) {
        ex.pc->buf->waitRecv(dl.left());
      }
    }
    // Our message must be out before a mismatch is reported (and this rank closes): every peer
    // then sees the mismatch too, rather than a closed connection.
    for (auto& b : sendBufs) {
      for (int i = 0; i < (perPeerStride == 0 ? size - 1 : 1); i++) {
        b->waitSend(dl.left());
      }
    }
  } catch (...) {
    sendBufs.clear();  // before the memory they point into
    c->unusedChecks.push_back(std::move(ex.pc));  // receives may still be pending
    throw;
  }
  for (int i = 0; i < size; i++) {
    const Desc& d = ex.desc(i);
    if (d.magic != kDescMagic || d.kind != mine.kind || d.dtype != mine.dtype || d.op != mine.op ||
        d.root != mine.root || d.tag != mine.tag || d.count != mine.count || d.extra != mine.extra) {
      std::string theirs = d.magic == kDescMagic ? describe(d) : std::string("an unknown message");
      throw NativeError(KIND_MISMATCH, "collective #" + std::to_string(mine.tag) + ": this rank called " +
                                           describe(mine) + " but rank " + std::to_string(i) + " called " +
                                           theirs);
    }
  }
  try {
    postCheck(c, mine.tag + 1);
  } catch (...) {
    // A peer already closed its connection: the next collective posts its own receives and
    // reports the failure.
  }
  return ex;
}

// The argument check alone (the payload then travels by gloo's algorithm).
void checkArgs(Comm* c, const std::shared_ptr<gloo::Context>& ctx, const Deadline& dl, const Desc& mine) {
  exchange(c, ctx, dl, mine, nullptr, 0);
}

// ---- local reduction of the inline payloads, in rank order ----

template <typename T>
void reduceRanks(const Exchanged& ex, int size, size_t offset, size_t n, T* out, RedFn fn) {
  // void* casts: gloo::float16 has a user-declared copy assignment but is a plain uint16_t
  std::memcpy(static_cast<void*>(out), ex.payload(0) + offset, n * sizeof(T));
  for (int r = 1; r < size; r++) {
    std::vector<T> x(n);
    std::memcpy(static_cast<void*>(x.data()), ex.payload(r) + offset, n * sizeof(T));
    fn(out, out, x.data(), n);
  }
}

template <typename T>
void reduceRanksNative(const Exchanged& ex, int size, size_t offset, size_t n, void* out, int op) {
  reduceRanks<T>(ex, size, offset, n, static_cast<T*>(out), reduction<T>(op));
  if (op == OP_AVG) {
    divideBy<T>(static_cast<T*>(out), n, size);
  }
}

// out (n elements of dt) = reduction over ranks of the inline payloads' elements [first, first+n).
void reduceInline(const Exchanged& ex, int size, bool torchHalf, size_t first, size_t n, void* out, int dt, int op) {
  const size_t off = first * dtypeSize(dt);
  if (dt == DT_F16 && torchHalf) {
    return reduceRanksNative<gloo::float16>(ex, size, off, n, out, op);
  }
  switch (dt) {
    case DT_F32: return reduceRanksNative<float>(ex, size, off, n, out, op);
    case DT_F64: return reduceRanksNative<double>(ex, size, off, n, out, op);
    case DT_I8: return reduceRanksNative<int8_t>(ex, size, off, n, out, op);
    case DT_U8: return reduceRanksNative<uint8_t>(ex, size, off, n, out, op);
    case DT_I32: return reduceRanksNative<int32_t>(ex, size, off, n, out, op);
    case DT_I64: return reduceRanksNative<int64_t>(ex, size, off, n, out, op);
    case DT_BOOL: {
      RedFn fn;
      switch (op) {
        case OP_SUM:
        case OP_MAX:
          fn = &boolOr;
          break;
        case OP_PROD:
        case OP_MIN:
          fn = &boolAnd;
          break;
        default:
          throw NativeError(KIND_ARGUMENT, "reduce op " + std::to_string(op) + " is not defined for bool");
      }
      return reduceRanks<uint8_t>(ex, size, off, n, static_cast<uint8_t*>(out), fn);
    }
    case DT_F16:
    case DT_BF16: {
      const bool isF16 = dt == DT_F16;
      std::vector<float> acc(n);
      std::vector<float> x(n);
      RedFn fn = reduction<float>(op);
      for (int r = 0; r < size; r++) {
        const uint8_t* src = ex.payload(r) + off;
        std::vector<float>& dst = r == 0 ? acc : x;
        for (size_t i = 0; i < n; i++) {
          uint16_t h;
          std::memcpy(&h, src + 2 * i, 2);
          dst[i] = isF16 ? f16ToFloat(h) : bf16ToFloat(h);
        }
        if (r > 0) {
          fn(acc.data(), acc.data(), x.data(), n);
        }
      }
      if (op == OP_AVG) {
        divideBy<float>(acc.data(), n, size);
      }
      auto* h = static_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; i++) {
        uint16_t v = isF16 ? floatToF16(acc[i]) : floatToBf16(acc[i]);
        std::memcpy(h + i, &v, 2);
      }
      return;
    }
    default:
      throw NativeError(KIND_ARGUMENT, "unknown dtype code " + std::to_string(dt));
  }
}

Desc desc(uint8_t kind, uint32_t tag, int dt, int op, int root, uint64_t count, uint64_t extra = 0) {
  Desc d{};
  d.magic = kDescMagic;
  d.kind = kind;
  d.dtype = static_cast<uint8_t>(dt);
  d.op = static_cast<uint8_t>(op);
  d.root = root;
  d.tag = tag;
  d.count = count;
  d.extra = extra;
  return d;
}

// Thread ids of this process (from /proc/self/task).
std::vector<long> processTasks() {
  std::vector<long> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) {
    return out;
  }
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long tid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) {
      out.push_back(tid);
    }
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::string taskComm(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    return "";
  }
  char buf[64] = {0};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  return std::string(buf, n);
}

// gloo's device starts one event-loop thread that, in this gloo version, spins on a level-triggered
// EPOLLIN while a message waits for its receive to be posted. On a machine with few cores that
// spinning thread competes with the very thread that is about to post the receive (CFS gives each
// a multi-millisecond slice: 2-4 ms stalls). Raising the loop thread's nice value lets the caller
// preempt it; the loop still runs whenever the callers wait. The loop thread is the one created by
// CreateDevice (a new task that inherited the calling thread's name).
void deprioritizeNewThreads(const std::vector<long>& before, int nice) {
  if (nice <= 0) {
    return;
  }
  const std::string self = taskComm("/proc/thread-self/comm");
  for (long tid : processTasks()) {
    if (!std::binary_search(before.begin(), before.end(), tid) &&
        taskComm("/proc/self/task/" + std::to_string(tid) + "/comm") == self) {
      setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice);
    }
  }
}

}  // namespace

// ---- JNI entry points ----

extern "C" {

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  g_vm = vm;
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) != JNI_OK) {
    return JNI_ERR;
  }
  jclass ex = env->FindClass("io/jcomm/cpu/gloo/internal/GlooNativeException");
  jclass bridge = env->FindClass("io/jcomm/cpu/gloo/internal/GlooStoreBridge");
  jclass str = env->FindClass("java/lang/String");
  if (ex == nullptr || bridge == nullptr || str == nullptr) {
    return JNI_ERR;
  }
  g_exClass = static_cast<jclass>(env->NewGlobalRef(ex));
  g_stringClass = static_cast<jclass>(env->NewGlobalRef(str));
  g_exCtor = env->GetMethodID(ex, "<init>", "(IILjava/lang/String;)V");
  g_bridgeSet = env->GetMethodID(bridge, "set", "(Ljava/lang/String;[B)V");
  g_bridgeGet = env->GetMethodID(bridge, "get", "(Ljava/lang/String;)[B");
  g_bridgeWait = env->GetMethodID(bridge, "await", "([Ljava/lang/String;J)V");
  if (g_exCtor == nullptr || g_bridgeSet == nullptr || g_bridgeGet == nullptr || g_bridgeWait == nullptr) {
    return JNI_ERR;
  }
  return JNI_VERSION_1_8;
}

JNIEXPORT jstring JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_probe(JNIEnv* env, jclass) {
  std::string s = "libgloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                  std::to_string(GLOO_VERSION_PATCH) + " (tcp transport)";
  return env->NewStringUTF(s.c_str());
}

JNIEXPORT jlong JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_create(JNIEnv* env, jclass, jint rank, jint size,
                                                                          jint devices, jboolean torchHalf) {
  jlong out = 0;
  guarded(env, nullptr, [&] {
    if (size < 2 || rank < 0 || rank >= size || devices < 1 || devices > 64) {
      throw NativeError(KIND_ARGUMENT, "bad group shape");
    }
    out = reinterpret_cast<jlong>(new Comm(rank, size, devices, torchHalf == JNI_TRUE));
  });
  return out;
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_connect(JNIEnv* env, jclass, jlong h, jint dev,
                                                                          jstring hostname, jstring iface,
                                                                          jobject bridge, jlong timeoutMs,
                                                                          jboolean goodbye, jint loopNice) {
  Comm* comm = nullptr;
  guarded(env, nullptr, [&] {
    comm = toComm(h);
    if (dev < 0 || dev >= comm->ndev || comm->contexts[dev]) {
      throw NativeError(KIND_ARGUMENT, "bad device index " + std::to_string(dev));
    }
    if (bridge == nullptr) {
      throw NativeError(KIND_ARGUMENT, "null store");
    }
    gloo::transport::tcp::attr attr;
    if (iface != nullptr) {
      const char* s = env->GetStringUTFChars(iface, nullptr);
      if (s == nullptr) {
        throw NativeError(KIND_OTHER, "out of memory");
      }
      attr.iface = s;
      env->ReleaseStringUTFChars(iface, s);
    } else if (hostname != nullptr) {
      const char* s = env->GetStringUTFChars(hostname, nullptr);
      if (s == nullptr) {
        throw NativeError(KIND_OTHER, "out of memory");
      }
      attr.hostname = s;
      env->ReleaseStringUTFChars(hostname, s);
    }
    const std::vector<long> tasksBefore = processTasks();
    auto device = gloo::transport::tcp::CreateDevice(attr);
    deprioritizeNewThreads(tasksBefore, loopNice);
    auto context = std::make_shared<gloo::rendezvous::Context>(comm->rank, comm->size);
    context->setTimeout(ms(timeoutMs));
    JavaStore store(env, bridge);
    context->connectFullMesh(store, device);
    auto sockets = locatePairSockets(context, comm->rank, comm->size, store.seen());
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->devices[dev] = device;
    comm->sockets[dev] = std::move(sockets);
    comm->contexts[dev] = context;
    if (goodbye) {
      comm->expectGoodbyes(dev, context);
    }
  });
}

JNIEXPORT jstring JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_describe(JNIEnv* env, jclass, jlong h, jint dev) {
  std::string s;
  guarded(env, nullptr, [&] {
    Comm* c = toComm(h);
    c->ctx(dev);
    std::lock_guard<std::mutex> lock(c->mutex);
    s = c->devices[dev]->str() + " peers{";
    for (int i = 0; i < c->size; i++) {
      if (i != c->rank) {
        const PairSocket& p = c->sockets[dev][i];
        s += " " + std::to_string(i) + "=" + (p.fd >= 0 ? p.peerName : std::string("?"));
      }
    }
    s += " }";
  });
  if (env->ExceptionCheck()) {
    return nullptr;
  }
  return env->NewStringUTF(s.c_str());
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_abort(JNIEnv* env, jclass, jlong h,
                                                                        jboolean goodbye) {
  guarded(env, nullptr, [&] {
    Comm* c = toComm(h);
    if (goodbye) {
      c->sayGoodbye(std::chrono::milliseconds(200));
    }
    c->abortAll();
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_destroy(JNIEnv* env, jclass, jlong h) {
  guarded(env, nullptr, [&] {
    if (h != 0) {
      delete reinterpret_cast<Comm*>(h);
    }
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_barrier(JNIEnv* env, jclass, jlong h, jint dev,
                                                                          jint tag, jlong timeoutMs, jboolean check) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      // every rank waits for every other rank's message: that is a barrier already
      checkArgs(comm, ctx, dl, desc(K_BARRIER, utag, 0, 0, -1, 0));
      return;
    }
    gloo::BarrierOptions o(ctx);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::barrier(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_broadcast(JNIEnv* env, jclass, jlong h, jint dev,
                                                                            jint tag, jlong timeoutMs,
                                                                            jboolean check, jobject buf, jlong bytes,
                                                                            jint dtype, jint root) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    checkRank(comm, root, "broadcast root");
    uint8_t* p = address(env, buf, bytes, "broadcast");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const bool small = static_cast<size_t>(bytes) <= kInline;
      Exchanged ex = exchange(comm, ctx, dl, desc(K_BROADCAST, utag, dtype, 0, root, static_cast<uint64_t>(bytes)),
                              p, small && comm->rank == root ? static_cast<size_t>(bytes) : 0);
      if (small) {
        if (comm->rank != root && bytes > 0) {
          std::memcpy(p, ex.payload(root), static_cast<size_t>(bytes));
        }
        return;
      }
    }
    if (bytes == 0) {
      return;
    }
    // The wire format does not depend on the element type: broadcast the bytes.
    gloo::BroadcastOptions o(ctx);
    o.setOutput<uint8_t>(p, static_cast<size_t>(bytes));
    o.setRoot(root);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::broadcast(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_allReduce(JNIEnv* env, jclass, jlong h, jint dev,
                                                                            jint tag, jlong timeoutMs,
                                                                            jboolean check, jobject buf, jlong numel,
                                                                            jint dtype, jint op) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    size_t es = dtypeSize(dtype);
    if (numel < 0) {
      throw NativeError(KIND_ARGUMENT, "negative element count");
    }
    uint8_t* p = address(env, buf, numel * static_cast<jlong>(es), "allReduce");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const size_t bytes = static_cast<size_t>(numel) * es;
      const bool small = bytes <= kInline;
      Exchanged ex = exchange(comm, ctx, dl, desc(K_ALLREDUCE, utag, dtype, op, -1, static_cast<uint64_t>(numel)),
                              p, small ? bytes : 0);
      if (small) {
        if (numel > 0) {
          reduceInline(ex, comm->size, comm->torchHalf, 0, static_cast<size_t>(numel), p, dtype, op);
        }
        return;
      }
    }
    if (numel == 0) {
      return;
    }
    allreduceAny(comm, ctx, utag, dl.left(), p, static_cast<size_t>(numel), dtype, op);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_reduceScatter(JNIEnv* env, jclass, jlong h,
                                                                                jint dev, jint tag, jlong timeoutMs,
                                                                                jboolean check, jobject in,
                                                                                jobject out, jlong outNumel,
                                                                                jint dtype, jint op) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    size_t es = dtypeSize(dtype);
    if (outNumel < 0) {
      throw NativeError(KIND_ARGUMENT, "negative element count");
    }
    const size_t chunk = static_cast<size_t>(outNumel) * es;
    const size_t total = chunk * static_cast<size_t>(comm->size);
    uint8_t* src = address(env, in, static_cast<jlong>(total), "reduceScatter input");
    uint8_t* dst = address(env, out, static_cast<jlong>(chunk), "reduceScatter output");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const bool small = total <= kInline;
      Exchanged ex = exchange(comm, ctx, dl,
                              desc(K_REDUCE_SCATTER, utag, dtype, op, -1, static_cast<uint64_t>(outNumel)), src,
                              small ? total : 0);
      if (small) {
        if (outNumel > 0) {
          reduceInline(ex, comm->size, comm->torchHalf, static_cast<size_t>(outNumel) * comm->rank,
                       static_cast<size_t>(outNumel), dst, dtype, op);
        }
        return;
      }
    }
    if (outNumel == 0) {
      return;
    }
    // gloo 2022 has no reduce-scatter for unbound buffers: all-reduce a copy of the input (one
    // tag, ring algorithm) and keep this rank's chunk. f16/bf16 are reduced in float.
    std::vector<uint8_t> tmp(src, src + total);
    allreduceAny(comm, ctx, utag, dl.left(), tmp.data(), static_cast<size_t>(outNumel) * comm->size, dtype, op);
    std::memcpy(dst, tmp.data() + chunk * comm->rank, chunk);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_allGather(JNIEnv* env, jclass, jlong h, jint dev,
                                                                            jint tag, jlong timeoutMs,
                                                                            jboolean check, jobject in, jobject out,
                                                                            jlong inBytes, jint dtype) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    uint8_t* src = address(env, in, inBytes, "allGather input");
    uint8_t* dst = address(env, out, inBytes * comm->size, "allGather output");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const bool small = static_cast<size_t>(inBytes) <= kInline;
      Exchanged ex = exchange(comm, ctx, dl, desc(K_ALLGATHER, utag, dtype, 0, -1, static_cast<uint64_t>(inBytes)),
                              src, small ? static_cast<size_t>(inBytes) : 0);
      if (small) {
        for (int r = 0; r < comm->size && inBytes > 0; r++) {
          std::memcpy(dst + static_cast<size_t>(inBytes) * r, ex.payload(r), static_cast<size_t>(inBytes));
        }
        return;
      }
    }
    if (inBytes == 0) {
      return;
    }
    gloo::AllgatherOptions o(ctx);
    o.setInput<uint8_t>(src, static_cast<size_t>(inBytes));
    o.setOutput<uint8_t>(dst, static_cast<size_t>(inBytes) * comm->size);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::allgather(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_allGatherV(JNIEnv* env, jclass, jlong h, jint dev,
                                                                             jint tag, jlong timeoutMs,
                                                                             jboolean check, jobject in,
                                                                             jobject out, jlongArray byteCounts,
                                                                             jint dtype) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    if (byteCounts == nullptr || env->GetArrayLength(byteCounts) != comm->size) {
      throw NativeError(KIND_ARGUMENT, "allGatherV: need one count per rank");
    }
    std::vector<jlong> counts(static_cast<size_t>(comm->size));
    env->GetLongArrayRegion(byteCounts, 0, comm->size, counts.data());
    std::vector<size_t> elements(counts.size());
    uint64_t total = 0;
    uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the counts
    for (size_t i = 0; i < counts.size(); i++) {
      if (counts[i] < 0) {
        throw NativeError(KIND_ARGUMENT, "allGatherV: negative count");
      }
      elements[i] = static_cast<size_t>(counts[i]);
      total += elements[i];
      for (int b = 0; b < 8; b++) {
        hash ^= (static_cast<uint64_t>(counts[i]) >> (8 * b)) & 0xff;
        hash *= 1099511628211ULL;
      }
    }
    uint8_t* src = address(env, in, counts[comm->rank], "allGatherV input");
    uint8_t* dst = address(env, out, static_cast<jlong>(total), "allGatherV output");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      checkArgs(comm, ctx, dl, desc(K_ALLGATHERV, utag, dtype, 0, -1, total, hash));
    }
    if (total == 0) {
      return;
    }
    gloo::AllgathervOptions o(ctx);
    o.setInput<uint8_t>(src, elements[comm->rank]);
    o.setOutput<uint8_t>(dst, elements);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::allgatherv(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_allToAll(JNIEnv* env, jclass, jlong h, jint dev,
                                                                           jint tag, jlong timeoutMs, jboolean check,
                                                                           jobject in, jobject out, jlong bytes,
                                                                           jint dtype) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    if (bytes < 0 || bytes % comm->size != 0) {
      throw NativeError(KIND_ARGUMENT, "allToAll: the byte count is not a multiple of the group size");
    }
    uint8_t* src = address(env, in, bytes, "allToAll input");
    uint8_t* dst = address(env, out, bytes, "allToAll output");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      checkArgs(comm, ctx, dl, desc(K_ALLTOALL, utag, dtype, 0, -1, static_cast<uint64_t>(bytes)));
    }
    if (bytes == 0) {
      return;
    }
    gloo::AlltoallOptions o(ctx);
    o.setInput<uint8_t>(src, static_cast<size_t>(bytes));
    o.setOutput<uint8_t>(dst, static_cast<size_t>(bytes));
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::alltoall(o);
  });
}

// Reads one non-negative count per rank; returns their sum.
static uint64_t readCounts(JNIEnv* env, jlongArray a, int size, std::vector<int64_t>& out, const char* what) {
  if (a == nullptr || env->GetArrayLength(a) != size) {
    throw NativeError(KIND_ARGUMENT, std::string("allToAllV: need one ") + what + " count per rank");
  }
  out.resize(static_cast<size_t>(size));
  env->GetLongArrayRegion(a, 0, size, reinterpret_cast<jlong*>(out.data()));
  uint64_t total = 0;
  for (int64_t c : out) {
    if (c < 0) {
      throw NativeError(KIND_ARGUMENT, std::string("allToAllV: negative ") + what + " count");
    }
    total += static_cast<uint64_t>(c);
  }
  return total;
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_allToAllV(JNIEnv* env, jclass, jlong h, jint dev,
                                                                            jint tag, jlong timeoutMs,
                                                                            jboolean check, jobject in, jobject out,
                                                                            jlongArray inByteCounts,
                                                                            jlongArray outByteCounts, jint dtype) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    const int size = comm->size;
    std::vector<int64_t> inC;
    std::vector<int64_t> outC;
    uint64_t inTotal = readCounts(env, inByteCounts, size, inC, "input");
    uint64_t outTotal = readCounts(env, outByteCounts, size, outC, "output");
    const size_t rowBytes = sizeof(int64_t) * static_cast<size_t>(size);
    const bool full = check && 2 * rowBytes <= kInline;
    if (!full && inC[comm->rank] != outC[comm->rank]) {
      // (with the full check every rank finds this pair too, and all fail alike)
      throw NativeError(KIND_MISMATCH, "allToAllV: this rank sends " + std::to_string(inC[comm->rank]) +
                                           " bytes to itself but expects " + std::to_string(outC[comm->rank]));
    }
    uint8_t* src = address(env, in, static_cast<jlong>(inTotal), "allToAllV input");
    uint8_t* dst = address(env, out, static_cast<jlong>(outTotal), "allToAllV output");
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      // Every rank sends everyone both of its rows (what it sends to, and expects from, each rank), so
      // every rank checks every pair and all reach the same verdict. Larger groups than fit inline
      // check the descriptor only (gloo then fails a wrong size with its own error).
      std::vector<int64_t> rows;
      if (full) {
        rows.insert(rows.end(), inC.begin(), inC.end());
        rows.insert(rows.end(), outC.begin(), outC.end());
      }
      Exchanged ex = exchange(comm, ctx, dl, desc(K_ALLTOALLV, utag, dtype, 0, -1, 0),
                              reinterpret_cast<const uint8_t*>(rows.data()), full ? 2 * rowBytes : 0);
      for (int p = 0; full && p < size; p++) {
        for (int q = 0; q < size; q++) {
          int64_t sends = 0;
          int64_t expects = 0;
          std::memcpy(&sends, ex.payload(p) + sizeof(int64_t) * q, sizeof(int64_t));
          std::memcpy(&expects, ex.payload(q) + rowBytes + sizeof(int64_t) * p, sizeof(int64_t));
          if (sends != expects) {
            throw NativeError(KIND_MISMATCH, "allToAllV #" + std::to_string(utag) + ": rank " + std::to_string(p) +
                                                 " sends " + std::to_string(sends) + " bytes to rank " +
                                                 std::to_string(q) + ", which expects " + std::to_string(expects));
          }
        }
      }
    }
    if (inTotal == 0 && outTotal == 0) {
      return;
    }
    gloo::AlltoallvOptions o(ctx);
    o.setInput<uint8_t>(src, inC);
    o.setOutput<uint8_t>(dst, outC);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::alltoallv(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_gather(JNIEnv* env, jclass, jlong h, jint dev,
                                                                         jint tag, jlong timeoutMs, jboolean check,
                                                                         jobject in, jobject out, jlong inBytes,
                                                                         jint dtype, jint root) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    checkRank(comm, root, "gather root");
    uint8_t* src = address(env, in, inBytes, "gather input");
    uint8_t* dst = comm->rank == root ? address(env, out, inBytes * comm->size, "gather output") : nullptr;
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const bool small = static_cast<size_t>(inBytes) <= kInline;
      Exchanged ex = exchange(comm, ctx, dl, desc(K_GATHER, utag, dtype, 0, root, static_cast<uint64_t>(inBytes)),
                              src, small ? static_cast<size_t>(inBytes) : 0);
      if (small) {
        for (int r = 0; dst != nullptr && r < comm->size && inBytes > 0; r++) {
          std::memcpy(dst + static_cast<size_t>(inBytes) * r, ex.payload(r), static_cast<size_t>(inBytes));
        }
        return;
      }
    }
    if (inBytes == 0) {
      return;
    }
    gloo::GatherOptions o(ctx);
    o.setInput<uint8_t>(src, static_cast<size_t>(inBytes));
    if (dst != nullptr) {
      o.setOutput<uint8_t>(dst, static_cast<size_t>(inBytes) * comm->size);
    }
    o.setRoot(root);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::gather(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_scatter(JNIEnv* env, jclass, jlong h, jint dev,
                                                                          jint tag, jlong timeoutMs, jboolean check,
                                                                          jobject in, jobject out, jlong outBytes,
                                                                          jint dtype, jint root) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    checkRank(comm, root, "scatter root");
    uint8_t* dst = address(env, out, outBytes, "scatter output");
    uint8_t* src = comm->rank == root ? address(env, in, outBytes * comm->size, "scatter input") : nullptr;
    Deadline dl(timeoutMs);
    auto utag = static_cast<uint32_t>(tag);
    if (check) {
      const bool small = static_cast<size_t>(outBytes) <= kInline;
      const bool parts = small && src != nullptr && outBytes > 0;
      Exchanged ex = exchange(comm, ctx, dl, desc(K_SCATTER, utag, dtype, 0, root, static_cast<uint64_t>(outBytes)),
                              src, parts ? static_cast<size_t>(outBytes) : 0, parts ? static_cast<size_t>(outBytes) : 0);
      if (small) {
        if (outBytes > 0) {
          std::memcpy(dst, ex.payload(root), static_cast<size_t>(outBytes));
        }
        return;
      }
    }
    if (outBytes == 0) {
      return;
    }
    gloo::ScatterOptions o(ctx);
    if (src != nullptr) {
      std::vector<uint8_t*> parts(static_cast<size_t>(comm->size));
      for (int i = 0; i < comm->size; i++) {
        parts[i] = src + static_cast<size_t>(outBytes) * i;
      }
      o.setInputs<uint8_t>(parts, static_cast<size_t>(outBytes));
    }
    o.setOutput<uint8_t>(dst, static_cast<size_t>(outBytes));
    o.setRoot(root);
    o.setTag(utag);
    o.setTimeout(dl.left());
    gloo::scatter(o);
  });
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_send(JNIEnv* env, jclass, jlong h, jint dev,
                                                                       jint tag, jlong timeoutMs, jboolean check,
                                                                       jobject buf, jlong bytes, jint dst) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    checkRank(comm, dst, "send destination");
    if (dst == comm->rank) {
      throw NativeError(KIND_ARGUMENT, "send to self");
    }
    uint8_t* p = address(env, buf, bytes, "send");
    auto ps = std::make_unique<Comm::PendingSend>();
    ps->deadline = Deadline(timeoutMs).end;
    ps->payload = comm->takeSpare(static_cast<size_t>(bytes));
    ps->payload.assign(p, p + bytes);
    ps->header = static_cast<uint64_t>(bytes);
    if (check) {
      ps->headerBuf = ctx->createUnboundBuffer(&ps->header, sizeof(ps->header));
      ps->headerBuf->send(dst, static_cast<uint64_t>(gloo::Slot::build(kP2pHeaderSlotPrefix, static_cast<uint32_t>(tag))));
    }
    ps->dataBuf = ctx->createUnboundBuffer(ps->payload.data(), ps->payload.size());
    ps->dataBuf->send(dst, static_cast<uint64_t>(static_cast<uint32_t>(tag)));
    comm->enqueue(std::move(ps));
  });
}

JNIEXPORT jboolean JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_flush(JNIEnv* env, jclass, jlong h,
                                                                           jlong timeoutMs) {
  jboolean out = JNI_FALSE;
  guarded(env, nullptr, [&] { out = toComm(h)->flush(ms(timeoutMs)) ? JNI_TRUE : JNI_FALSE; });
  return out;
}

JNIEXPORT void JNICALL Java_io_jcomm_cpu_gloo_internal_GlooNative_recv(JNIEnv* env, jclass, jlong h, jint dev,
                                                                       jint tag, jlong timeoutMs, jboolean check,
                                                                       jobject buf, jlong bytes, jint src) {
  guarded(env, reinterpret_cast<Comm*>(h), [&] {
    Comm* comm = toComm(h);
    const auto& ctx = comm->ctx(dev);
    comm->throwIfSendFailed();
    checkRank(comm, src, "recv source");
    if (src == comm->rank) {
      throw NativeError(KIND_ARGUMENT, "recv from self");
    }
    uint8_t* p = address(env, buf, bytes, "recv");
    Deadline dl(timeoutMs);
    auto slot = static_cast<uint64_t>(static_cast<uint32_t>(tag));
    if (check) {
      uint64_t header = 0;
      auto hb = ctx->createUnboundBuffer(&header, sizeof(header));
      hb->recv(src, static_cast<uint64_t>(gloo::Slot::build(kP2pHeaderSlotPrefix, static_cast<uint32_t>(tag))));
      hb->waitRecv(dl.left());
      if (header != static_cast<uint64_t>(bytes)) {
        if (header < static_cast<uint64_t>(bytes)) {
          // The message fits: take it so that the sender completes, then report the mismatch.
          auto b = ctx->createUnboundBuffer(p, static_cast<size_t>(header));
          b->recv(src, slot);
          b->waitRecv(dl.left());
        }
        throw NativeError(KIND_MISMATCH, "recv from rank " + std::to_string(src) + " with tag " +
                                             std::to_string(tag) + ": expected " + std::to_string(bytes) +
                                             " bytes but the sender sent " + std::to_string(header));
      }
    }
    auto b = ctx->createUnboundBuffer(p, static_cast<size_t>(bytes));
    b->recv(src, slot);
    b->waitRecv(dl.left());
  });
}

}  // extern "C"
