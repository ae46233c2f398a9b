#!/usr/bin/env python3
"""bench-profile.sh's PING_INTERVAL_MS experiment: sends an ApiVersions v0 request to every
given Kafka port on 127.0.0.1 every INTERVAL_MS ms (client id "profile-pinger", one
connection per port, waiting for each answer), until a connection closes or it is killed.

Usage: bench-profile-pinger.py INTERVAL_MS PORT...
"""
import socket, struct, sys, time
interval, ports = float(sys.argv[1]) / 1000.0, [int(p) for p in sys.argv[2:]]
socks = [socket.create_connection(("127.0.0.1", p)) for p in ports]
for s in socks:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data
client_id, corr = b"profile-pinger", 0
while True:
    for s in socks:
        corr += 1
        body = struct.pack(">hhih", 18, 0, corr, len(client_id)) + client_id  # ApiVersions v0
        s.sendall(struct.pack(">i", len(body)) + body)
    for s in socks:
        recv_exactly(s, struct.unpack(">i", recv_exactly(s, 4))[0])
    time.sleep(interval)
