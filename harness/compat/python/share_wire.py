"""The share-group admin requests the librdkafka preview lacks, over a plain socket.

confluent-kafka-python 2.16.1 (librdkafka 2.16.0) has a share consumer but no share-group admin
operations (its guide: "No share-group admin operations (describe / list / alter / delete share
groups and offsets)"), while the share scenarios check the broker's own record of the group as
java-4.4.0-share does with Admin: ListShareGroupOffsets (DescribeShareGroupOffsets, key 90,
KIP-1226's lag from v1) and describeShareGroups (ShareGroupDescribe, key 77). This module sends
those two requests to the group's coordinator (FindCoordinator v1), each at the highest version
both sides support (ApiVersions v0). Standard library only; PLAINTEXT listeners only (the share
scenarios run without connection security).
"""

import struct
import socket
import uuid

CLIENT_ID = "compat-share-wire"
FIND_COORDINATOR, API_VERSIONS, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 10, 18, 77, 90
# The versions this module encodes and decodes.
OURS = {SHARE_GROUP_DESCRIBE: (0, 1), DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1)}
SOCKET_TIMEOUT_S = 5.0


class WireError(Exception):
    """A request failed: no broker answered, or the answer carries an error code."""


def _i8(v):
    return struct.pack(">b", v)


def _i16(v):
    return struct.pack(">h", v)


def _i32(v):
    return struct.pack(">i", v)


def _string(s):
    b = s.encode()
    return _i16(len(b)) + b


def _uvarint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def _compact_string(s):
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _compact_array(items):
    return _uvarint(len(items) + 1) + b"".join(items)


class _Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def uuid(self):
        raw = self.data[self.pos:self.pos + 16]
        self.pos += 16
        return str(uuid.UUID(bytes=raw))

    def string(self):
        n = self.i16()
        return self._text(n) if n >= 0 else None

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(">B")
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint() - 1
        return self._text(n) if n >= 0 else None

    def _text(self, n):
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def compact_array(self, item):
        n = self.uvarint() - 1
        return [item() for _ in range(max(n, 0))]

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed")
        out += chunk
    return out


def _call(address, api_key, version, body, flexible):
    """One request on a fresh connection: the response body after its header."""
    header = _i16(api_key) + _i16(version) + _i32(1) + _string(CLIENT_ID) + (b"\x00" if flexible else b"")
    frame = header + body
    host, port = address
    with socket.create_connection((host, int(port)), timeout=SOCKET_TIMEOUT_S) as s:
        s.sendall(_i32(len(frame)) + frame)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        r = _Reader(_recv_exact(s, size))
    r.i32()  # correlation id
    if flexible:
        r.skip_tags()
    return r


class ShareWire:
    """The two share-group admin requests against a cluster (bootstrap: "host:port,...")."""

    def __init__(self, bootstrap):
        self.bootstrap = [tuple(hp.rsplit(":", 1)) for hp in bootstrap.split(",") if hp]

    def _coordinator(self, group):
        """FindCoordinator v1 (key type 0, group) at the first bootstrap broker that answers."""
        errors = []
        for address in self.bootstrap:
            try:
                r = _call(address, FIND_COORDINATOR, 1, _string(group) + _i8(0), flexible=False)
            except OSError as e:
                errors.append("%s:%s %s" % (address[0], address[1], e))
                continue
            r.i32()  # throttle
            error, message = r.i16(), r.string()
            node, host, port = r.i32(), r.string(), r.i32()
            if error != 0:
                raise WireError("FindCoordinator(%s) error %d %s" % (group, error, message))
            return node, (host, port)
        raise WireError("no bootstrap broker answered FindCoordinator: " + "; ".join(errors))

    @staticmethod
    def _version(address, api_key):
        """The highest version of api_key both the broker (ApiVersions v0) and this module speak."""
        r = _call(address, API_VERSIONS, 0, b"", flexible=False)
        error = r.i16()
        if error != 0:
            raise WireError("ApiVersions error %d" % error)
        ranges = {}
        for _ in range(r.i32()):
            key, low, high = r.i16(), r.i16(), r.i16()
            ranges[key] = (low, high)
        ours = OURS[api_key]
        if api_key not in ranges:
            raise WireError("the broker does not support API key %d" % api_key)
        low, high = max(ours[0], ranges[api_key][0]), min(ours[1], ranges[api_key][1])
        if low > high:
            raise WireError("no common version of API key %d: broker %s, ours %s" % (api_key, ranges[api_key], ours))
        return high

    def share_group_offsets(self, group, topic, partitions):
        """DescribeShareGroupOffsets for topic's partitions 0..partitions-1 at the group's
        coordinator: {partition: (start offset, lag or None below v1)}; raises WireError for a
        group or partition error."""
        _node, address = self._coordinator(group)
        version = self._version(address, DESCRIBE_SHARE_GROUP_OFFSETS)
        topics = _compact_array([_compact_string(topic) + _compact_array([_i32(p) for p in range(partitions)]) + b"\x00"])
        body = _compact_array([_compact_string(group) + topics + b"\x00"]) + b"\x00"
        r = _call(address, DESCRIBE_SHARE_GROUP_OFFSETS, version, body, flexible=True)
        r.i32()  # throttle
        out, errors = {}, []

        def partition():
            index, start, _epoch = r.i32(), r.i64(), r.i32()
            lag = r.i64() if version >= 1 else None
            error, message = r.i16(), r.compact_string()
            r.skip_tags()
            if error != 0:
                errors.append("partition %d error %d %s" % (index, error, message))
            out[index] = (start, lag)

        def one_topic():
            r.compact_string()
            r.uuid()
            r.compact_array(partition)
            r.skip_tags()

        def one_group():
            r.compact_string()
            r.compact_array(one_topic)
            error, message = r.i16(), r.compact_string()
            r.skip_tags()
            if error != 0:
                errors.append("group error %d %s" % (error, message))

        r.compact_array(one_group)
        if errors:
            raise WireError("DescribeShareGroupOffsets v%d of %s: %s" % (version, group, "; ".join(errors)))
        return out

    def describe_share_group(self, group):
        """ShareGroupDescribe at the group's coordinator: (state, [(member id, client id,
        {topic: sorted partitions})]); raises WireError for a group error."""
        _node, address = self._coordinator(group)
        version = self._version(address, SHARE_GROUP_DESCRIBE)
        body = _compact_array([_compact_string(group)]) + b"\x00" + b"\x00"  # group ids, no operations, tags
        r = _call(address, SHARE_GROUP_DESCRIBE, version, body, flexible=True)
        r.i32()  # throttle

        def topic_partitions():
            r.uuid()
            name = r.compact_string()
            parts = r.compact_array(r.i32)
            r.skip_tags()
            return name, sorted(parts)

        def member():
            member_id, _rack, _epoch = r.compact_string(), r.compact_string(), r.i32()
            client_id, _host = r.compact_string(), r.compact_string()
            r.compact_array(r.compact_string)  # subscribed topic names
            assignment = dict(r.compact_array(topic_partitions))
            r.skip_tags()  # the assignment's
            r.skip_tags()
            return member_id, client_id, assignment

        def one_group():
            error, message = r.i16(), r.compact_string()
            r.compact_string()
            state = r.compact_string()
            r.i32()
            r.i32()
            r.compact_string()
            members = r.compact_array(member)
            r.i32()  # authorized operations
            r.skip_tags()
            if error != 0:
                raise WireError("ShareGroupDescribe v%d of %s: error %d %s" % (version, group, error, message))
            return state, members

        groups = r.compact_array(one_group)
        if len(groups) != 1:
            raise WireError("ShareGroupDescribe of %s answered %d groups" % (group, len(groups)))
        return groups[0]
