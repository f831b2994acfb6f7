#!/usr/bin/python3
"""Writes the hand-made seed inputs of test/fuzz/corpus/<fuzzer>/ (run from anywhere; rerun after a
format change). Each seed is a small valid input, so the fuzzers start from the protocol's shape
rather than from random bytes."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x46525259
SECRET = bytes.fromhex("00112233445566778899aabbccddeeff")  # fuzz_store_server.cpp's job secret


def frame(kind, payload):
    return struct.pack(">IHHI", MAGIC, kind, 0, len(payload)) + payload


def legacy_hello(secret, rank, size, version=1):
    """Protocol 1's HELLO, which carried the secret itself; the root refuses it by version."""
    return frame(1, secret + struct.pack(">III", rank, size, version))


def hello(nonce, version=2, kind=1):
    """HELLO (kind 1) or CHALLENGE (kind 5): version and a 32-byte nonce."""
    return frame(kind, struct.pack(">I", version) + nonce)


def auth(rank, size, proof):
    return frame(6, struct.pack(">II", rank, size) + proof)


def gather(round_, data, deadline=0xFFFFFFFF):
    return frame(2, struct.pack(">QI", round_, deadline) + data)


def reply(round_, contributions):
    body = struct.pack(">QI", round_, len(contributions))
    for c in contributions:
        body += struct.pack(">I", len(c)) + c
    return frame(3, body)


def error(code, text):
    return frame(4, struct.pack(">I", code) + text)


def write(fuzzer, name, data):
    d = os.path.join(HERE, "corpus", fuzzer)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# wire: world size byte, receive-size seed byte, then what the root sends a rank.
write("wire", "welcome", bytes([1, 7]) + frame(3, bytes(range(32))))
write("wire", "challenge-then-welcome", bytes([2, 5]) + hello(bytes([7]) * 32, kind=5) + frame(3, bytes(32)))
write("wire", "challenge-then-error", bytes([1, 11]) + hello(bytes(32), kind=5) + error(4, b"proof does not verify"))
write("wire", "reply-2-ranks", bytes([1, 3]) + reply(0, [b"ab", b""]))
write("wire", "reply-then-error", bytes([2, 9]) + reply(5, [b"x", b"yz", b"123"]) + error(7, b"rank 1 timed out"))
write("wire", "gather-body", bytes([0, 1]) + frame(3, struct.pack(">QI", 1, 500) + b"data"))

# store_server: the root's configured world size (0: rank 0's registration sets it), then op
# bytes (see fuzz_store_server.cpp). 7|conn<<3, rank, size, flags: the handshake with the secret.
def data(conn, payload):
    out = b""
    for i in range(0, len(payload), 255):
        part = payload[i:i + 255]
        out += bytes([conn << 3, len(part)]) + part
    return out


def handshake(conn, rank, size, flags=0):
    return bytes([7 | conn << 3, rank, size, flags])


two_ranks = bytes([0]) + handshake(0, 0, 2) + handshake(1, 1, 2)
two_ranks += data(0, gather(0, b"hello")) + data(1, gather(0, b"world"))
two_ranks += data(0, gather(1, b"")) + data(1, gather(1, b""))
write("store_server", "two-ranks-two-rounds", two_ranks)
parked = bytes([0]) + handshake(1, 1, 3) + handshake(2, 2, 5) + handshake(3, 2, 3) + handshake(0, 0, 3)
parked += data(0, gather(0, b"a")) + data(1, gather(0, b"b")) + data(3, gather(0, b"c")) + bytes([5 | 1 << 3, 6])
write("store_server", "parked-until-rank-0", parked)
write("store_server", "configured-size",
      bytes([3]) + handshake(1, 1, 5) + handshake(2, 1, 3) + handshake(0, 0, 3) + data(0, gather(0, b"q")))
write("store_server", "bad-proofs", bytes([2]) + handshake(0, 0, 2, 2) + handshake(1, 1, 2, 4) + handshake(2, 1, 2, 1))
write("store_server", "legacy-hello",
      bytes([0]) + data(0, legacy_hello(SECRET, 0, 2)) + data(1, legacy_hello(SECRET, 1, 2, 2)))
write("store_server", "replayed-auth",
      bytes([0]) + data(1, hello(bytes(32))) + data(1, auth(0, 2, bytes(32))) + data(2, auth(0, 2, bytes(32))))
write("store_server", "oversized-and-truncated",
      bytes([0]) + data(0, struct.pack(">IHHI", MAGIC, 1, 0, 0xFFFFFFFF)) + data(1, hello(bytes(32))[:20]) +
      bytes([5 | 1 << 3]))
write("store_server", "garbage", bytes([1]) + data(0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))

# unique_id: selector byte, then the value.
uid = struct.pack(">IHHH", 0x46524944, 1, 4, 29500) + b"\0\0" + bytes([127, 0, 0, 1]) + bytes(12) + bytes(4) + SECRET
uid += bytes(128 - len(uid))
uid6 = struct.pack(">IHHH", 0x46524944, 1, 6, 80) + b"\0\0" + bytes(15) + b"\x01" + struct.pack(">I", 2) + SECRET
uid6 += bytes(128 - len(uid6))
write("unique_id", "ipv4", bytes([0]) + uid)
write("unique_id", "ipv6", bytes([0]) + uid6)
write("unique_id", "hex", bytes([1]) + uid.hex().encode())
write("unique_id", "secret-hex", bytes([2]) + SECRET.hex().encode())
write("unique_id", "secret-text", bytes([2]) + b"my job secret")
write("unique_id", "addr-v4", bytes([3]) + b"127.0.0.1:29500")
write("unique_id", "addr-v6", bytes([3]) + b"[::1]:80")

# records: selector byte, then the record (native little-endian, as peer_info.cpp writes it).
def peer(host, host_id, boot):
    out = b""
    for s in (host, host_id, boot):
        out += struct.pack("<I", len(s)) + s
    out += struct.pack("<QQqQ", 4026531836, 4026531837, 1234, 0xfeedface)
    return out + b"\x03" + bytes(127)  # cpu_set_t: CPUs 0 and 1


write("records", "peer", bytes([0]) + peer(b"vm", b"vm/1b2c", b"1b2c"))
write("records", "host-model",
      bytes([1]) + b"ferry-host-model 4 2e-07 1e-05 1.2e+10 3e+10 9e+09 2e+10 8e+09 1.5e-06 2097152 2\n")
write("records", "control", bytes([2]) + struct.pack("<i", 5) + b"allReduce #3 on rank 1: timed out")
write("records", "status-query", bytes([3]) + struct.pack("<IQ", 1, 7))
# An answer: kind, call asked about, call at, active, the call packed (kind 5 = broadcast, float32,
# root 1) and its count, then the state line.
write("records", "status-answer",
      bytes([3]) + struct.pack("<IQQBQQ", 2, 7, 6, 1, 5 | 7 << 8 | 1 << 32, 64) + b"broadcast #6 step 2/3")

# env: NAME=VALUE entries separated by NUL bytes.
def env(*entries):
    return b"\0".join(e.encode() for e in entries)


write("env", "ferry", env("FERRY_RANK=1", "FERRY_WORLD_SIZE=4", "FERRY_LOCAL_RANK=1", "FERRY_LOCAL_SIZE=2",
                          "FERRY_ADDR=127.0.0.1:29500", "FERRY_SOCKET_IFNAME=^docker,lo", "FERRY_DEBUG=INFO",
                          "FERRY_DEBUG_SUBSYS=INIT,NET"))
write("env", "torchrun", env("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=::1", "MASTER_PORT=29500",
                             "FERRY_ALGO=allreduce:ring,oneshot;reduce:chain", "FERRY_PROTO=shm,cma",
                             "FERRY_TIMEOUT=30", "FERRY_SOCKET_IFNAME==eth0"))
write("env", "slurm", env("SLURM_PROCID=3", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "NCCL_COMM_ID=[fe80::1]:4000",
                          "NCCL_DEBUG=WARN", "FERRY_CHECK_MISMATCH=yes"))

# call: our call (kind, count, type, op, root), theirs as raw words, a fingerprint, algorithm, protocol.
mine = struct.pack(">BQBBI", 1, 1024, 7, 0, 0)
theirs = struct.pack(">IQIII", 5, 1024, 7, 0, 2)
write("call", "allreduce-vs-broadcast", mine + theirs + struct.pack(">III", 0x512345, 1, 2))
write("call", "garbage-header", mine + bytes([0xFF] * 28) + struct.pack(">III", 0xFFFFFF, 99, 99))


# shrink: selector byte (0 contact, 1 greeting, 2 reply), then the bytes (little-endian, as sent).
SHRINK_SECRET = bytes((i * 17) % 256 for i in range(16))  # fuzz_shrink.cpp's kSecret
SHRINK_COMM = 0x0123456789abcdef


def contact(addr, secret):
    a = addr.encode()
    return struct.pack("<BH", 1 if addr else 0, len(a)) + a + secret


def greeting(rank, exclude, secret=SHRINK_SECRET, comm=SHRINK_COMM):
    return (struct.pack("<I", 0x46534831) + secret + struct.pack("<QiI", comm, rank, len(exclude)) +
            b"".join(struct.pack("<i", e) for e in exclude))


def shrink_reply(code, msg, members, gone):
    m = msg.encode()
    return (struct.pack("<IiI", 0x46534852, code, len(m)) + m + struct.pack("<I", len(members)) +
            b"".join(struct.pack("<i", r) for r in members) + struct.pack("<I", len(gone)) +
            b"".join(struct.pack("<i", r) for r in gone))


write("shrink", "contact-v4", bytes([0]) + contact("127.0.0.1:40123", SHRINK_SECRET))
write("shrink", "contact-v6", bytes([0]) + contact("[::1]:40123", SHRINK_SECRET))
write("shrink", "contact-none", bytes([0]) + contact("", SHRINK_SECRET))
write("shrink", "greeting", bytes([1]) + greeting(5, [2, 7]))
write("shrink", "greeting-wrong-secret", bytes([1]) + greeting(1, [], secret=bytes(16)))
write("shrink", "reply-ok", bytes([2]) + shrink_reply(0, "", [2, 4, 5], [3]))
write("shrink", "reply-error", bytes([2]) + shrink_reply(9, "shrink: ranks disagree", [], []))
