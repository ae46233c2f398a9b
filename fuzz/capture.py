#!/usr/bin/env python3
"""Captures the fuzz seed corpus from real clients (issue 13).

Starts three onelog nodes on ephemeral ports, each behind a recording proxy (each node
advertises its proxy's address in Metadata, so every connection of every client goes through
one), runs each client command against them, then writes the seeds the fuzz targets start from:

  seeds/request_decode/  request frames (header + body, no length prefix), as the listener
                         reads them
  seeds/record_batch/    the record set of each Produce partition
  seeds/group_protocol/  the JoinGroup metadata of protocol type "consumer"

Each file is named after its content's SHA-1 (libFuzzer's convention), so a refresh into the
same directory adds new shapes and keeps the old ones. Seeds are capped per kind (spread over
sizes, every kind kept) and by size to keep the checked-in corpus small; libFuzzer grows its own
working corpus from these.

Usage (the commands get COMPAT_BOOTSTRAP, see harness/compat/README.md; fuzz/README.md has the
command lines used for the checked-in corpus):

  python3 fuzz/capture.py --onelog target/debug/onelog --seeds fuzz/seeds -- 'CMD1' 'CMD2' ...
"""

import argparse
import asyncio
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

# Keep the corpus small (issue 13: a few hundred files, < 2 MB): larger inputs mostly repeat
# record bytes, and libFuzzer's -max_len in scripts/fuzz.sh is of the same order.
FRAME_BYTES_MAX = 16 * 1024
# Per kind of frame: (api key, version), and for Produce also the codec, transactional and
# idempotent bits of its first batch; per kind of record set: those three bits.
FRAMES_PER_KIND_MAX = 4
RECORD_SETS_PER_KIND_MAX = 12
GROUP_METADATA_MAX = 30
PRODUCE, JOIN_GROUP = 0, 11
NODE_READY_TIMEOUT_S = 60
# Three voters: the compat scenarios create topics with replication factor 3.
NODES = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    def __init__(self):
        self.frames = {}  # sha1 -> bytes

    def add(self, frame):
        self.frames.setdefault(hashlib.sha1(frame).hexdigest(), frame)


async def pipe_requests(reader, writer, recorder):
    while True:
        prefix = await reader.readexactly(4)
        (length,) = struct.unpack(">i", prefix)
        body = await reader.readexactly(length) if length > 0 else b""
        recorder.add(body)
        writer.write(prefix + body)
        await writer.drain()


async def pipe_bytes(reader, writer):
    while True:
        data = await reader.read(65536)
        if not data:
            break
        writer.write(data)
        await writer.drain()


async def proxy_connection(client_r, client_w, broker_port, recorder):
    try:
        broker_r, broker_w = await asyncio.open_connection("127.0.0.1", broker_port)
    except OSError:
        client_w.close()
        return
    tasks = [asyncio.ensure_future(pipe_requests(client_r, broker_w, recorder)),
             asyncio.ensure_future(pipe_bytes(broker_r, client_w))]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t in tasks:
        t.cancel()
    for w in (client_w, broker_w):
        w.close()


async def run_clients(commands, nodes, recorder, env, log_dir):
    servers = [await asyncio.start_server(
        lambda r, w, port=n.kafka_port: proxy_connection(r, w, port, recorder),
        "127.0.0.1", n.proxy_port) for n in nodes]
    try:
        for i, command in enumerate(commands):
            print(f"capture: running {command}", file=sys.stderr)
            started = time.monotonic()
            with open(os.path.join(log_dir, f"client-{i}.log"), "wb") as log:
                proc = await asyncio.create_subprocess_shell(
                    command, env={**env, "COMPAT_PREFIX": f"fuzzseed{i}"},
                    stdout=asyncio.subprocess.PIPE, stderr=log)
                out, _ = await proc.communicate()
            passed = out.decode(errors="replace").count('"pass"')
            print(f"capture: exit {proc.returncode} after {time.monotonic() - started:.0f}s, "
                  f"{passed} scenarios passed, {len(recorder.frames)} distinct frames so far",
                  file=sys.stderr)
    finally:
        for server in servers:
            server.close()


class Node:
    """One onelog voter; clients reach it only through its proxy port, which it advertises."""

    def __init__(self, node_id, binary):
        self.node_id, self.binary = node_id, binary
        self.kafka_port, self.raft_port, self.proxy_port = free_port(), free_port(), free_port()
        self.data_dir = tempfile.mkdtemp(prefix=f"onelog-capture-{node_id}-")
        self.proc = None

    def start(self, nodes):
        peers = ",".join(f"{n.node_id}=127.0.0.1:{n.raft_port}@127.0.0.1:{n.proxy_port}"
                         for n in nodes if n is not self)
        self.proc = subprocess.Popen(
            [self.binary, "--node-id", str(self.node_id), "--data-dir", self.data_dir,
             "--kafka-listen", f"127.0.0.1:{self.kafka_port}",
             "--advertised-kafka", f"127.0.0.1:{self.proxy_port}",
             "--raft-listen", f"127.0.0.1:{self.raft_port}", "--peers", peers,
             # Small segments until the disk fix lands (issue 13 item 6).
             "--config", "log.segment.bytes=1048576"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def wait_listening(port, proc):
    deadline = time.monotonic() + NODE_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"capture: onelog exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"capture: onelog did not listen on {port} within {NODE_READY_TIMEOUT_S}s")


# --- Just enough of the wire format to pull record sets and member metadata out of frames. ---

class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if n < 0 or self.at + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self):
        value, shift = 0, 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self, flexible):
        n = self.uvarint() - 1 if flexible else self.i16()
        return self.take(n) if n >= 0 else None

    def bytes_(self, flexible):
        n = self.uvarint() - 1 if flexible else self.i32()
        return self.take(n) if n >= 0 else None

    def count(self, flexible):
        return self.uvarint() - 1 if flexible else self.i32()

    def tagged_fields(self, flexible):
        if flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())


def body_reader(frame, flexible):
    r = Reader(frame)
    r.take(8)  # api key, version, correlation id
    r.string(False)  # client id: a classic string in both header versions
    r.tagged_fields(flexible)
    return r


def produce_record_sets(frame, version):
    flexible = version >= 9
    r = body_reader(frame, flexible)
    r.string(flexible)  # transactional id
    r.take(6)  # acks, timeout
    for _ in range(r.count(flexible)):
        if version >= 13:
            r.take(16)  # topic id
        else:
            r.string(flexible)
        for _ in range(r.count(flexible)):
            r.take(4)  # partition index
            records = r.bytes_(flexible)
            if records:
                yield records
            r.tagged_fields(flexible)
        r.tagged_fields(flexible)


def join_group_metadata(frame, version):
    flexible = version >= 6
    r = body_reader(frame, flexible)
    r.string(flexible)  # group id
    r.take(4)  # session timeout
    if version >= 1:
        r.take(4)  # rebalance timeout
    r.string(flexible)  # member id
    if version >= 5:
        r.string(flexible)  # group instance id
    if r.string(flexible) != b"consumer":
        return
    for _ in range(r.count(flexible)):
        r.string(flexible)  # protocol name
        metadata = r.bytes_(flexible)
        if metadata:
            yield metadata
        r.tagged_fields(flexible)


def batch_kind(records):
    """(codec, transactional, idempotent) of a record set's first batch: seeds keep each kind."""
    if len(records) < 61:
        return ("short",)
    attributes, producer_id = struct.unpack(">h", records[21:23])[0], struct.unpack(">q", records[43:51])[0]
    return (attributes & 0x07, bool(attributes & 0x10), producer_id >= 0)


def write_seeds(seeds_dir, recorder):
    frames, record_sets, metadata = {}, {}, {}
    for frame in recorder.frames.values():
        if len(frame) < 8:
            continue
        key, version = struct.unpack(">hh", frame[:4])
        kind = (key, version)
        try:
            if key == PRODUCE and version >= 3:
                for records in produce_record_sets(frame, version):
                    kind = (key, version) + batch_kind(records)
                    record_sets.setdefault(batch_kind(records), {})[hashlib.sha1(records).hexdigest()] = records
            if key == JOIN_GROUP:
                for m in join_group_metadata(frame, version):
                    metadata[hashlib.sha1(m).hexdigest()] = m
        except ValueError as e:
            print(f"capture: could not read key {key} v{version}: {e}", file=sys.stderr)
        if len(frame) <= FRAME_BYTES_MAX:
            frames.setdefault(kind, []).append(frame)
    targets = {
        "request_decode": [f for same in frames.values()
                           for f in spread(sorted(same, key=len), FRAMES_PER_KIND_MAX)],
        "record_batch": [r for same in record_sets.values()
                         for r in spread(sorted((r for r in same.values() if len(r) <= FRAME_BYTES_MAX),
                                                key=len), RECORD_SETS_PER_KIND_MAX)],
        "group_protocol": spread(sorted(metadata.values(), key=len), GROUP_METADATA_MAX),
    }
    for target, inputs in targets.items():
        out = os.path.join(seeds_dir, target)
        os.makedirs(out, exist_ok=True)
        for data in inputs:
            with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
        print(f"capture: {target}: {len(inputs)} seeds, {sum(map(len, inputs))} bytes",
              file=sys.stderr)
    print("capture: kinds of frame seen (key, version[, codec, transactional, idempotent]): "
          + " ".join(map(str, sorted(frames, key=str))), file=sys.stderr)
    print("capture: kinds of record set seen: " + " ".join(map(str, sorted(record_sets, key=str))),
          file=sys.stderr)


def spread(items, limit):
    """Up to `limit` items spread evenly over the (size-sorted) list: small and large both."""
    if len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--onelog", required=True, help="the onelog binary")
    parser.add_argument("--seeds", required=True, help="the seeds directory to add to")
    parser.add_argument("--logs", default=tempfile.gettempdir(),
                        help="directory for each client's stderr (client-N.log)")
    parser.add_argument("commands", nargs="+", help="client commands, run one after another")
    args = parser.parse_args()
    nodes = [Node(i, args.onelog) for i in range(1, NODES + 1)]
    recorder = Recorder()
    try:
        for node in nodes:
            node.start(nodes)
        for node in nodes:
            wait_listening(node.kafka_port, node.proc)
        env = {**os.environ, "COMPAT_BOOTSTRAP": ",".join(f"127.0.0.1:{n.proxy_port}" for n in nodes)}
        asyncio.run(run_clients(args.commands, nodes, recorder, env, args.logs))
    finally:
        for node in nodes:
            node.stop()
    write_seeds(args.seeds, recorder)


if __name__ == "__main__":
    main()
