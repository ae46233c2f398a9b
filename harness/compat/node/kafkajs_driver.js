// Compatibility-matrix driver for kafkajs 2.2.4 (harness/compat/README.md has the contract).
//
// kafkajs has no manual partition assignment: every read goes through a consumer group of its
// own (fromBeginning), and `seek` works only after `run`. It ships only the gzip codec (snappy,
// lz4 and zstd need third-party codec packages), has no "none" offset-reset policy (it always
// resets on OFFSET_OUT_OF_RANGE) and no IncrementalAlterConfigs (AlterConfigs instead).
'use strict';

const { exec } = require('child_process');
const fs = require('fs');
const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes } = require('kafkajs');
const VERSION = require('kafkajs/package.json').version;

const CLIENT = 'kafkajs';
const SCENARIOS = [
  'create_topic', 'produce_consume', 'compression', 'consume_earliest', 'consume_latest',
  'seek_timestamp', 'group_rebalance', 'member_leave_rejoin', 'idempotent_produce',
  'txn_commit_abort', 'consume_process_produce', 'txn_fencing', 'alter_config', 'delete_records',
  'leader_kill', 'txn_leader_kill', 'err_unknown_topic', 'err_offset_out_of_range', 'err_stale_generation',
  'err_fenced_producer',
];
const BOOTSTRAP = (process.env.COMPAT_BOOTSTRAP || '127.0.0.1:19092').split(',');
const PREFIX = process.env.COMPAT_PREFIX || `compat-js-${process.pid}`;
const TIMEOUT_S = Number(process.env.COMPAT_TIMEOUT_S || '60');
const KILL_LEADER = process.env.COMPAT_KILL_LEADER || '';
// The security suite (COMPAT_SUITE=security, scripts/security-accept.sh): its ids and names.
const SECURITY_SCENARIOS = ['sec_produce_consume', 'sec_txn_allowed', 'sec_txn_denied', 'sec_bad_credentials'];
const SECURITY_SUITE = process.env.COMPAT_SUITE === 'security';
const SEC_TOPIC = process.env.COMPAT_SEC_TOPIC || 'sec-topic';
const SEC_TXN_ALLOWED = process.env.COMPAT_SEC_TXN_ALLOWED || 'txn-a';
const SEC_TXN_DENIED = process.env.COMPAT_SEC_TXN_DENIED || 'txn-b';

// Connection security from the environment (issue #15): COMPAT_SECURITY_PROTOCOL, COMPAT_SASL_*
// and COMPAT_SSL_CA / COMPAT_SSL_CERT / COMPAT_SSL_KEY (PEM), as kafkajs's `ssl` and `sasl`.
const PROTOCOL = (process.env.COMPAT_SECURITY_PROTOCOL || 'PLAINTEXT').toUpperCase();
const SASL = PROTOCOL.startsWith('SASL_');
const TLS = PROTOCOL.endsWith('SSL');
function security(password = process.env.COMPAT_SASL_PASSWORD || '', clientCert = true) {
  const out = {};
  if (TLS) {
    const ssl = {};
    if (process.env.COMPAT_SSL_CA) ssl.ca = [fs.readFileSync(process.env.COMPAT_SSL_CA, 'utf8')];
    if (clientCert && process.env.COMPAT_SSL_CERT && process.env.COMPAT_SSL_KEY) {
      ssl.cert = fs.readFileSync(process.env.COMPAT_SSL_CERT, 'utf8');
      ssl.key = fs.readFileSync(process.env.COMPAT_SSL_KEY, 'utf8');
    }
    out.ssl = ssl;
  }
  if (SASL) {
    out.sasl = { mechanism: (process.env.COMPAT_SASL_MECHANISM || 'SCRAM-SHA-512').toLowerCase(), username: process.env.COMPAT_SASL_USERNAME || '', password };
  }
  return out;
}

// The errors kafkajs logged: some broker errors reach only the log (see sec_txn_denied).
const brokerErrors = [];

const kafka = new Kafka({
  ...security(),
  clientId: 'onelog-compat',
  brokers: BOOTSTRAP,
  logLevel: logLevel.ERROR,
  logCreator: () => ({ level, log }) => {
    if (log.error) brokerErrors.push(log);
    process.stderr.write(`[kafkajs ${level}] ${JSON.stringify(log)}\n`);
  },
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const name = (scenario, suffix = '') => `${PREFIX}-${CLIENT}-${scenario}${suffix}`;
let groupSeq = 0;
const freshGroup = (scenario) => name(scenario, `-g${groupSeq++}`);

function expect(cond, what) {
  if (!cond) throw new Error(what);
}
function expectEq(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g === w) return;
  if (Array.isArray(got) && Array.isArray(want)) {
    // Say where they part: long record lists do not fit in a detail line.
    const at = want.findIndex((x, i) => JSON.stringify(x) !== JSON.stringify(got[i]));
    const i = at < 0 ? want.length : at;
    throw new Error(`${what}: got ${got.length} items, want ${want.length}; first difference at ${i}: got ${JSON.stringify(got[i])}, want ${JSON.stringify(want[i])}`);
  }
  throw new Error(`${what}: got ${g.slice(0, 300)}, want ${w.slice(0, 300)}`);
}

// n records with keys, values and two headers: {key, value, headers} as strings.
function records(n, tag = 'r') {
  return Array.from({ length: n }, (_, i) => ({
    key: `k-${tag}-${i}`,
    value: `v-${tag}-${i}`,
    headers: { h1: `a${i}`, h2: '' },
  }));
}
const values = (n, tag) => records(n, tag).map((r) => r.value);
const plain = (m) => ({
  key: m.key && m.key.toString(),
  value: m.value && m.value.toString(),
  headers: Object.fromEntries(Object.entries(m.headers || {}).map(([k, v]) => [k, v ? v.toString() : ''])),
});

async function withAdmin(fn) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

async function topic(scenario, partitions = 1, suffix = '') {
  const t = name(scenario, suffix);
  await withAdmin(async (admin) => {
    await admin.createTopics({
      topics: [{ topic: t, numPartitions: partitions, replicationFactor: 3, configEntries: [{ name: 'segment.bytes', value: '1048576' }] }],
      waitForLeaders: true,
    });
  });
  return t;
}

async function produce(t, recs, opts = {}, partition = 0) {
  const p = kafka.producer(opts.producer || {});
  await p.connect();
  try {
    await p.send({ topic: t, acks: -1, compression: opts.compression, messages: recs.map((r) => ({ ...r, partition })) });
  } finally {
    await p.disconnect();
  }
}

// Reads n messages (then 1 s more, to see there are no others) through a fresh group.
async function readAll(t, n, opts = {}) {
  const cons = kafka.consumer({ groupId: freshGroup('read'), readUncommitted: !!opts.readUncommitted, maxWaitTimeInMs: 200 });
  await cons.connect();
  const out = [];
  try {
    await cons.subscribe({ topics: [t], fromBeginning: true });
    await cons.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { out.push(Object.assign(message, { partition })); } });
    const deadline = Date.now() + (TIMEOUT_S * 1000) / 3;
    while (out.length < n && Date.now() < deadline) await sleep(100);
    expect(out.length >= n, `read ${out.length} of ${n}: ${JSON.stringify(out.map((m) => m.value.toString())).slice(0, 300)}`);
    await sleep(opts.extraMs === undefined ? 1000 : opts.extraMs);
  } finally {
    await cons.disconnect();
  }
  return out;
}

const scenarios = {
  async create_topic() {
    const t = await topic('create_topic', 3);
    const md = await withAdmin((a) => a.fetchTopicMetadata({ topics: [t] }));
    const parts = md.topics[0].partitions;
    expectEq(parts.map((p) => p.partitionId).sort(), [0, 1, 2], 'partitions');
    expect(parts.every((p) => p.replicas.length === 3), '3 replicas each');
    return '3 partitions, 3 replicas each';
  },

  async produce_consume() {
    const t = await topic('produce_consume');
    const recs = records(20);
    await produce(t, recs);
    expectEq((await readAll(t, 20)).map(plain), recs, 'records');
    return '20 records with keys and 2 headers exact';
  },

  async compression() {
    const t = await topic('compression', 1, '-gzip');
    const recs = records(50, 'gzip');
    await produce(t, recs, { compression: CompressionTypes.GZIP });
    expectEq((await readAll(t, 50)).map(plain), recs, 'gzip records');
    return 'codecs: gzip (kafkajs ships no snappy, lz4 or zstd codec)';
  },

  async consume_earliest() {
    const t = await topic('consume_earliest');
    const recs = records(10);
    await produce(t, recs);
    expectEq((await readAll(t, 10)).map(plain), recs, 'records');
    return '10 of 10 from a group without offsets';
  },

  async consume_latest() {
    const t = await topic('consume_latest');
    await produce(t, records(5, 'old'));
    const cons = kafka.consumer({ groupId: freshGroup('consume_latest'), maxWaitTimeInMs: 200 });
    const out = [];
    let joined = false;
    cons.on(cons.events.GROUP_JOIN, () => { joined = true; });
    await cons.connect();
    try {
      await cons.subscribe({ topics: [t], fromBeginning: false });
      await cons.run({ autoCommit: false, eachMessage: async ({ message }) => { out.push(plain(message)); } });
      while (!joined) await sleep(100);
      await sleep(2000); // the latest reset (ListOffsets) happens on the first fetch
      expectEq(out, [], 'records before producing');
      const fresh = records(5, 'new');
      await produce(t, fresh);
      const deadline = Date.now() + 20000;
      while (out.length < 5 && Date.now() < deadline) await sleep(100);
      await sleep(1000);
      expectEq(out, fresh, 'records after joining');
    } finally {
      await cons.disconnect();
    }
    return 'only the 5 records produced after joining';
  },

  async seek_timestamp() {
    const t = await topic('seek_timestamp');
    const base = Date.now() - 60000;
    await produce(t, records(5).map((r, i) => ({ ...r, timestamp: String(base + i * 1000) })));
    const found = await withAdmin((a) => a.fetchTopicOffsetsByTimestamp(t, base + 2500));
    expectEq(found, [{ partition: 0, offset: '3' }], 'offsets for base+2.5s');
    const cons = kafka.consumer({ groupId: freshGroup('seek_timestamp'), maxWaitTimeInMs: 200 });
    const out = [];
    await cons.connect();
    try {
      await cons.subscribe({ topics: [t], fromBeginning: true });
      await cons.run({ autoCommit: false, eachMessage: async ({ message }) => { out.push(message); } });
      cons.seek({ topic: t, partition: 0, offset: found[0].offset });
      const deadline = Date.now() + 20000;
      while (!out.some((m) => m.offset === '3') && Date.now() < deadline) await sleep(100);
    } finally {
      await cons.disconnect();
    }
    const at = out.find((m) => m.offset === '3');
    expect(at, 'record 3 not read after the seek');
    expectEq([at.value.toString(), Number(at.timestamp)], ['v-r-3', base + 3000], 'record');
    return 'fetchTopicOffsetsByTimestamp -> 3, read v-r-3';
  },

  async group_rebalance() {
    const t = await topic('group_rebalance', 3);
    const groupId = name('group_rebalance', '-g');
    const seen = [];
    const members = [];
    const start = async () => {
      const cons = kafka.consumer({ groupId, maxWaitTimeInMs: 200, sessionTimeout: 10000 });
      const m = { cons, assigned: 0 };
      cons.on(cons.events.GROUP_JOIN, (e) => {
        m.assigned = Object.values(e.payload.memberAssignment).reduce((s, ps) => s + ps.length, 0);
      });
      await cons.connect();
      await cons.subscribe({ topics: [t], fromBeginning: true });
      await cons.run({
        autoCommit: false,
        eachMessage: async ({ topic: tp, partition, message }) => {
          // Past 15, pause without committing: these records are the resumed consumer's.
          if (seen.length >= 15) { members.forEach((x) => x.cons.pause([{ topic: t }])); return; }
          await cons.commitOffsets([{ topic: tp, partition, offset: String(Number(message.offset) + 1) }]);
          seen.push(message.value.toString());
        },
      });
      members.push(m);
      return m;
    };
    const a = await start();
    await waitFor(() => a.assigned === 3, 'a never got 3 partitions');
    const b = await start();
    await waitFor(() => a.assigned > 0 && b.assigned > 0 && a.assigned + b.assigned === 3, 'the two never shared');
    const sizes = [a.assigned, b.assigned];
    let everything = [];
    for (let p = 0; p < 3; p++) {
      const recs = records(10, `p${p}`);
      await produce(t, recs, {}, p);
      everything = everything.concat(recs.map((r) => r.value));
    }
    await waitFor(() => seen.length >= 15, `consumed ${seen.length} of 15`);
    await a.cons.disconnect();
    await b.cons.disconnect();
    // a and b consume concurrently: one may pass the check of 15 together with the other.
    const first = seen.slice();
    const resumed = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
    const rest = [];
    await resumed.connect();
    await resumed.subscribe({ topics: [t], fromBeginning: true });
    await resumed.run({ autoCommit: false, eachMessage: async ({ message }) => { rest.push(message.value.toString()); } });
    const committed = await withAdmin((x) => x.fetchOffsets({ groupId, topics: [t] }));
    const at = JSON.stringify(committed[0].partitions.map((x) => [x.partition, x.offset]));
    await waitFor(() => rest.length >= 30 - first.length, `resumed ${rest.length} of ${30 - first.length} (committed ${at})`);
    await sleep(2000);
    await resumed.disconnect();
    expectEq(first.concat(rest).sort(), everything.sort(), 'records before and after the resume');
    return `assignment ${JSON.stringify(sizes)}, ${first.length} committed then ${rest.length} resumed`;
  },

  async member_leave_rejoin() {
    const t = await topic('member_leave_rejoin', 3);
    const groupId = name('member_leave_rejoin', '-g');
    const start = async () => {
      const cons = kafka.consumer({ groupId, maxWaitTimeInMs: 200, sessionTimeout: 10000 });
      const m = { cons, assigned: 0 };
      cons.on(cons.events.GROUP_JOIN, (e) => {
        m.assigned = Object.values(e.payload.memberAssignment).reduce((s, ps) => s + ps.length, 0);
      });
      await cons.connect();
      await cons.subscribe({ topics: [t] });
      await cons.run({ eachMessage: async () => {} });
      return m;
    };
    const a = await start();
    const b = await start();
    await waitFor(() => a.assigned > 0 && b.assigned > 0 && a.assigned + b.assigned === 3, 'the two never shared');
    await b.cons.disconnect();
    await waitFor(() => a.assigned === 3, 'a never got all 3 partitions after b left');
    const c = await start();
    await waitFor(() => a.assigned > 0 && c.assigned > 0 && a.assigned + c.assigned === 3, 'the rejoined member got nothing');
    const sizes = [a.assigned, c.assigned];
    await a.cons.disconnect();
    await c.cons.disconnect();
    return `after leave 3/3, after rejoin ${JSON.stringify(sizes)}`;
  },

  async idempotent_produce() {
    const t = await topic('idempotent_produce');
    const recs = records(200);
    await produce(t, recs, { producer: { idempotent: true, maxInFlightRequests: 1 } });
    expectEq((await readAll(t, 200)).map(plain), recs, 'records');
    return '200 records once, in order';
  },

  async txn_commit_abort() {
    const t = await topic('txn_commit_abort');
    const p = txnProducer(name('txn_commit_abort'));
    await p.connect();
    for (const [tag, n, commit] of [['c1', 5, true], ['a', 3, false], ['c2', 5, true]]) {
      const txn = await p.transaction();
      await txn.send({ topic: t, messages: records(n, tag).map((r) => ({ ...r, partition: 0 })) });
      await (commit ? txn.commit() : txn.abort());
    }
    await p.disconnect();
    const rc = (await readAll(t, 10)).map((m) => m.value.toString());
    expectEq(rc, values(5, 'c1').concat(values(5, 'c2')), 'read_committed');
    const ru = (await readAll(t, 13, { readUncommitted: true })).map((m) => m.value.toString());
    expectEq(ru, values(5, 'c1').concat(values(3, 'a'), values(5, 'c2')), 'read_uncommitted');
    return 'read_committed 10, read_uncommitted 13';
  },

  async consume_process_produce() {
    const src = await topic('consume_process_produce', 1, '-in');
    const dst = await topic('consume_process_produce', 1, '-out');
    const groupId = name('consume_process_produce', '-g');
    await produce(src, records(10));
    const p = txnProducer(name('consume_process_produce'));
    await p.connect();
    const cons = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
    await cons.connect();
    const inputs = [];
    await cons.subscribe({ topics: [src], fromBeginning: true });
    await cons.run({ autoCommit: false, eachMessage: async ({ message }) => { inputs.push(message); } });
    await waitFor(() => inputs.length >= 10, `read ${inputs.length} of 10 inputs`);
    await cons.pause([{ topic: src }]);
    const txn = await p.transaction();
    await txn.send({ topic: dst, messages: inputs.map((m) => ({ key: m.key, value: `out-${m.value}`, partition: 0 })) });
    await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: src, partitions: [{ partition: 0, offset: '10' }] }] });
    await txn.commit();
    await p.disconnect();
    await cons.disconnect();
    const out = (await readAll(dst, 10)).map((m) => m.value.toString());
    expectEq(out, values(10, 'r').map((v) => `out-${v}`), 'output');
    const committed = await withAdmin((a) => a.fetchOffsets({ groupId, topics: [src] }));
    expectEq(committed[0].partitions.map((x) => x.offset), ['10'], 'committed offsets');
    return '10 outputs exact, committed offset 10';
  },

  async txn_fencing() {
    const { t, p2, err } = await fencedPair('txn_fencing');
    const txn = await p2.transaction();
    await txn.send({ topic: t, messages: [{ value: 'from-p2', partition: 0 }] });
    await txn.commit();
    await p2.disconnect();
    expectEq((await readAll(t, 1)).map((m) => m.value.toString()), ['from-p2'], 'read_committed');
    return `p1 got ${err.type}; p2 committed`;
  },

  async alter_config() {
    const t = await topic('alter_config');
    const got = await withAdmin(async (a) => {
      await a.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: t, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] });
      return a.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: t, configNames: ['retention.ms'] }] });
    });
    expectEq(got.resources[0].configEntries.map((e) => [e.configName, e.configValue]), [['retention.ms', '3600000']], 'read back');
    return 'AlterConfigs retention.ms=3600000 read back';
  },

  async delete_records() {
    const t = await topic('delete_records');
    await produce(t, records(10));
    const offsets = await withAdmin(async (a) => {
      await a.fetchTopicMetadata({ topics: [t] }); // deleteTopicRecords needs it loaded
      await a.deleteTopicRecords({ topic: t, partitions: [{ partition: 0, offset: '5' }] });
      return a.fetchTopicOffsets(t);
    });
    expectEq([offsets[0].low, offsets[0].high], ['5', '10'], 'low and high watermark');
    const got = await readAll(t, 5);
    expectEq(got.map((m) => m.offset), ['5', '6', '7', '8', '9'], 'offsets from earliest');
    return 'low watermark 5, earliest read starts at 5';
  },

  async leader_kill() {
    const t = await topic('leader_kill');
    const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: { retries: 30, maxRetryTime: 5000 } });
    await p.connect();
    const acked = [];
    const errors = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop; i += 10) {
        const batch = Array.from({ length: 10 }, (_, j) => ({ value: `lk-${i + j}`, partition: 0 }));
        try {
          await p.send({ topic: t, acks: -1, messages: batch });
          acked.push(...batch.map((m) => m.value));
        } catch (e) {
          errors.push(e);
        }
      }
    })();
    await sleep(2000);
    expect(KILL_LEADER, 'COMPAT_KILL_LEADER is not set');
    await new Promise((resolve, reject) => exec(KILL_LEADER, (e, _o, se) => {
      process.stderr.write(se);
      return e ? reject(e) : resolve();
    }));
    await sleep(3000);
    stop = true;
    await loop;
    await p.disconnect();
    expect(acked.length > 0, 'nothing acknowledged');
    const got = new Set((await readAll(t, acked.length, { extraMs: 2000 })).map((m) => m.value.toString()));
    const lost = acked.filter((v) => !got.has(v));
    expect(lost.length === 0, `${lost.length} acknowledged records lost, e.g. ${lost.slice(0, 3)}`);
    return `${acked.length} acked, all read back (${errors.length} failed sends)`;
  },

  // Transactions (one record to each of 3 partitions, then commit) across a kill of the Raft
  // leader: none may fail, and read_committed must give every committed one once, in order.
  async txn_leader_kill() {
    const t = await topic('txn_leader_kill', TXN_PARTITIONS);
    // Retries worth about a minute at every step: an election is waited out inside kafkajs.
    const p = kafka.producer({
      transactionalId: name('txn_leader_kill'), idempotent: true, maxInFlightRequests: 1,
      transactionTimeout: 60000, retry: { retries: 20, initialRetryTime: 200, maxRetryTime: 3000 },
    });
    await p.connect();
    const started = performance.now();
    const committed = [];
    let failure = null;
    let current = null;
    let stop = false;
    let killWanted = false;
    let heldSeq = null;
    const loop = (async () => {
      for (let seq = 0; !stop; seq++) {
        const began = performance.now();
        current = { seq, began, step: 'send' };
        let commitStarted = null;
        try {
          const txn = await p.transaction();
          await txn.send({ topic: t, acks: -1, messages: Array.from({ length: TXN_PARTITIONS }, (_, i) => ({ key: txnValue(seq, i), value: txnValue(seq, i), partition: i })) });
          if (killWanted && heldSeq === null) {
            // Held open, its records acknowledged, while the kill starts.
            heldSeq = seq;
            current.step = 'held open';
            await sleep(TXN_HOLD_MS);
          }
          commitStarted = performance.now();
          current.step = 'commit';
          await txn.commit();
        } catch (e) {
          const at = commitStarted === null ? 'send' : `commit after ${Math.round(performance.now() - commitStarted)} ms`;
          failure = { seq, at: performance.now(), text: `${at}: ${e.name}${e.type ? ` ${e.type}` : ''}: ${e.message}${e.retriable === undefined ? '' : ` (retriable: ${e.retriable})`}` };
          process.stderr.write(`${e.stack}\n`);
          return;
        }
        const done = performance.now();
        committed.push({ seq, began, done, commit: done - commitStarted });
      }
    })();
    await sleep(TXN_BEFORE_MS);
    killWanted = true;
    const heldBy = performance.now() + 15000;
    while (heldSeq === null && !failure) {
      expect(performance.now() < heldBy, `no transaction got its records acknowledged in 15 s: transaction ${current.seq} in ${current.step}; ${committed.length} committed`);
      await sleep(5);
    }
    if (failure) {
      stop = true;
      throw new Error(`transaction ${failure.seq} failed before the kill: ${failure.text}`);
    }
    const killBegan = performance.now();
    let killErr = null;
    try {
      await killLeader();
    } catch (e) {
      killErr = e;
    }
    const killEnded = performance.now();
    await sleep(TXN_AFTER_MS);
    stop = true;
    // Leave the reading-back a third of the scenario's budget.
    let timer;
    const stuck = new Promise((resolve) => { timer = setTimeout(() => resolve(true), Math.max(1000, (TIMEOUT_S * 1000 * 2) / 3 - (performance.now() - started))); });
    const hung = await Promise.race([loop.then(() => false), stuck]);
    clearTimeout(timer);
    if (hung) {
      const now = performance.now();
      throw new Error(`transaction ${current.seq} stuck in ${current.step}, ${((now - current.began) / 1000).toFixed(1)} s after it began (${((now - killBegan) / 1000).toFixed(1)} s after the kill began); ${committed.length} committed`);
    }
    await p.disconnect();
    if (killErr) throw killErr;
    const before = committed.filter((c) => c.done < killBegan).length;
    const during = committed.filter((c) => c.done >= killBegan && c.done < killEnded).length;
    const after = committed.length - before - during;
    const held = committed.find((c) => c.seq === heldSeq);
    const counts = `${committed.length} committed: ${before} before the kill, ${during} during it (${((killEnded - killBegan) / 1000).toFixed(1)} s), ${after} after; transaction ${heldSeq} held open across the kill${held ? `, its commit took ${Math.round(held.commit)} ms` : ''}`;
    if (failure) {
      const when = failure.at >= killBegan ? `${((failure.at - killBegan) / 1000).toFixed(1)} s after the kill began` : `${((killBegan - failure.at) / 1000).toFixed(1)} s before the kill`;
      throw new Error(`transaction ${failure.seq} failed ${when}: ${failure.text}; ${counts}`);
    }
    expect(before > 0, `no transaction committed before the kill; ${counts}`);
    expect(after > 0, `no transaction committed after the kill; ${counts}`);
    const got = await readAll(t, committed.length * TXN_PARTITIONS);
    for (let i = 0; i < TXN_PARTITIONS; i++) {
      const have = got.filter((m) => m.partition === i).map((m) => m.value.toString());
      exactlyOnce(`partition ${i} under read_committed`, have, committed.map((c) => txnValue(c.seq, i)));
    }
    const longest = Math.max(...committed.map((c) => c.done - c.began));
    const longestCommit = Math.max(...committed.map((c) => c.commit));
    return `${counts}; all ${committed.length * TXN_PARTITIONS} records read back once under read_committed; longest transaction ${Math.round(longest)} ms (commit call ${Math.round(longestCommit)} ms)`;
  },

  async err_unknown_topic() {
    const p = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 2, maxRetryTime: 2000 } });
    await p.connect();
    try {
      await p.send({ topic: name('err_unknown_topic', '-missing'), messages: [{ value: 'x' }] });
    } catch (e) {
      const type = e.type || (e.originalError && e.originalError.type) || e.name;
      // kafkajs wraps the last retried error; its message is the broker's error text.
      const text = `${type} ${e.message}`;
      expect(/UNKNOWN_TOPIC_OR_PARTITION|does not host this topic-partition|Timeout/i.test(text), `unexpected error ${text}`);
      return `${e.name} ${type}: ${e.message}`;
    } finally {
      await p.disconnect();
    }
    throw new Error('produce to a missing topic succeeded');
  },

  async err_offset_out_of_range() {
    // kafkajs has no "none" reset policy: it resets on OFFSET_OUT_OF_RANGE, as against Kafka.
    const t = await topic('err_offset_out_of_range');
    await produce(t, records(5));
    const cons = kafka.consumer({ groupId: freshGroup('err_offset_out_of_range'), maxWaitTimeInMs: 200 });
    const out = [];
    await cons.connect();
    try {
      await cons.subscribe({ topics: [t], fromBeginning: true });
      await cons.run({ autoCommit: false, eachMessage: async ({ message }) => { out.push(message.offset); } });
      cons.seek({ topic: t, partition: 0, offset: '100' });
      await waitFor(() => out.length >= 5, `read ${out.length} of 5 after the reset`);
      await sleep(1000);
    } finally {
      await cons.disconnect();
    }
    expectEq(out.slice(-5), ['0', '1', '2', '3', '4'], 'offsets after the reset to earliest');
    return 'seek to 100 of 5: OFFSET_OUT_OF_RANGE, reset to earliest (fromBeginning), read 0..4';
  },

  async err_stale_generation() {
    const t = await topic('err_stale_generation', 2);
    await produce(t, records(1));
    const groupId = name('err_stale_generation', '-g');
    const a = kafka.consumer({ groupId, sessionTimeout: 6000, rebalanceTimeout: 6000, heartbeatInterval: 1000, maxWaitTimeInMs: 200 });
    let got = false;
    let commitError = null;
    let released;
    const done = new Promise((r) => { released = r; });
    await a.connect();
    await a.subscribe({ topics: [t], fromBeginning: true });
    await a.run({
      autoCommit: false,
      eachMessage: async ({ topic: tp, partition }) => {
        if (got) return;
        got = true;
        // Block past the session timeout: the group moves on without this member.
        await sleep(12000);
        try {
          await a.commitOffsets([{ topic: tp, partition, offset: '1' }]);
        } catch (e) {
          commitError = e;
        }
        released();
      },
    });
    await waitFor(() => got, 'a never got the record');
    const b = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
    await b.connect();
    await b.subscribe({ topics: [t], fromBeginning: true });
    await b.run({ autoCommit: false, eachMessage: async () => {} });
    await done;
    await b.disconnect();
    await a.disconnect().catch(() => {});
    expect(commitError, 'a member kicked out of the group committed');
    const cause = commitError.type ? commitError : commitError.originalError || commitError;
    const text = `${cause.type || cause.name}: ${cause.message}`;
    // UNKNOWN_MEMBER_ID's text is "The coordinator is not aware of this member".
    expect(/ILLEGAL_GENERATION|UNKNOWN_MEMBER_ID|REBALANCE_IN_PROGRESS|not aware of this member|generation/i.test(text), `unexpected commit error ${text}`);
    return `commit after being kicked out: ${text}`;
  },

  async err_fenced_producer() {
    const { t, p1, err } = await fencedPair('err_fenced_producer');
    try {
      const txn = await p1.transaction();
      await txn.send({ topic: t, messages: [{ value: 'again', partition: 0 }] });
      await txn.commit();
    } catch (again) {
      return `${err.type}; next transaction refused: ${again.type || again.name}`;
    }
    throw new Error('the fenced producer committed another transaction');
  },
};

// txn_leader_kill: transactions run for TXN_BEFORE_MS, then across COMPAT_KILL_LEADER, then
// TXN_AFTER_MS more; each writes one record to each of TXN_PARTITIONS partitions. The kill starts
// while one transaction is held open with its records acknowledged (TXN_HOLD_MS before its
// commit), so it always lands inside an open transaction, never by chance between two.
const TXN_BEFORE_MS = 2000;
const TXN_HOLD_MS = 1000;
const TXN_AFTER_MS = 3000;
const TXN_PARTITIONS = 3;
const txnValue = (seq, partition) => `tlk-${seq}-p${partition}`;

// Runs COMPAT_KILL_LEADER: kill -9 the Raft leader, wait for a new one, restart the node.
function killLeader() {
  expect(KILL_LEADER, 'COMPAT_KILL_LEADER is not set');
  return new Promise((resolve, reject) => exec(KILL_LEADER, (e, _o, se) => {
    process.stderr.write(se);
    return e ? reject(e) : resolve();
  }));
}

// Throws unless have is exactly want (each value once, in order), counting what differs.
function exactlyOnce(what, have, want) {
  if (JSON.stringify(have) === JSON.stringify(want)) return;
  const wanted = new Set(want);
  const seen = new Set();
  let dups = 0;
  for (const v of have) {
    if (seen.has(v)) dups++;
    seen.add(v);
  }
  const missing = want.filter((v) => !seen.has(v));
  const extra = have.filter((v) => !wanted.has(v));
  const order = !missing.length && !dups && !extra.length ? ', out of order' : '';
  throw new Error(`${what}: ${have.length} records, want ${want.length}; ${missing.length} missing (e.g. ${missing.slice(0, 3)}), ${dups} duplicated, ${extra.length} unexpected (e.g. ${extra.slice(0, 3)})${order}`);
}

function txnProducer(transactionalId) {
  return kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, retry: { retries: 3, maxRetryTime: 3000 } });
}

async function fencedPair(scenario) {
  const t = await topic(scenario);
  const id = name(scenario);
  const p1 = txnProducer(id);
  await p1.connect();
  const txn = await p1.transaction();
  await txn.send({ topic: t, messages: [{ value: 'from-p1', partition: 0 }] });
  const p2 = txnProducer(id);
  await p2.connect();
  await (await p2.transaction()).abort(); // InitProducerId for p2: the fencing step
  try {
    await txn.commit();
  } catch (err) {
    const e = err.type ? err : err.originalError || err;
    expect(/PRODUCER_FENCED|INVALID_PRODUCER_EPOCH/.test(e.type || ''), `fencing error, got ${e.type || e.name}: ${e.message}`);
    return { t, p1, p2, err: e };
  }
  throw new Error('the fenced producer committed');
}

async function waitFor(cond, what, ms = (TIMEOUT_S * 1000) / 2) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    expect(Date.now() < deadline, what);
    await sleep(100);
  }
}

function emit(scenario, result, detail) {
  process.stdout.write(`${JSON.stringify({ client: CLIENT, version: VERSION, scenario, result, detail })}\n`);
}

// --- the security suite ---

// The values of SEC_TOPIC starting with tag, through a fresh group, read until the consumer
// passed the high watermark seen first (a committed transaction's marker may be the last offset).
async function secRead(tag, n, readUncommitted) {
  const high = Number((await withAdmin((a) => a.fetchTopicOffsets(SEC_TOPIC)))[0].high);
  const cons = kafka.consumer({ groupId: freshGroup('read'), readUncommitted, maxWaitTimeInMs: 200 });
  await cons.connect();
  const out = [];
  let last = -1;
  try {
    await cons.subscribe({ topics: [SEC_TOPIC], fromBeginning: true });
    await cons.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        last = Math.max(last, Number(message.offset));
        if (message.value.toString().startsWith(tag)) out.push(message.value.toString());
      },
    });
    await waitFor(() => out.length >= n && (high === 0 || last >= high - 2), `read ${out.length} of ${n} (offset ${last} of ${high})`);
    await sleep(1000);
  } finally {
    await cons.disconnect();
  }
  return out;
}

const tagged = (tag, n) => Array.from({ length: n }, (_, i) => `${tag}${i}`);

const securityScenarios = {
  async sec_produce_consume() {
    const tag = `${PREFIX}-pc-`;
    const want = tagged(tag, 5);
    await produce(SEC_TOPIC, want.map((value) => ({ value })));
    expectEq(await secRead(tag, 5, false), want, 'records read through the group');
    return '5 records produced and read back through a group';
  },

  async sec_txn_allowed() {
    const tag = `${PREFIX}-txa-`;
    const want = tagged(tag, 3);
    const p = txnProducer(SEC_TXN_ALLOWED);
    await p.connect();
    try {
      const txn = await p.transaction();
      await txn.send({ topic: SEC_TOPIC, acks: -1, messages: want.map((value) => ({ value, partition: 0 })) });
      await txn.commit();
    } finally {
      await p.disconnect();
    }
    expectEq(await secRead(tag, 3, false), want, 'read_committed');
    return `transaction with ${SEC_TXN_ALLOWED} committed; read_committed reads its 3 records`;
  },

  async sec_txn_denied() {
    const tag = `${PREFIX}-txb-`;
    const p = txnProducer(SEC_TXN_DENIED);
    let err;
    try {
      await p.connect();
      const txn = await p.transaction();
      await txn.send({ topic: SEC_TOPIC, acks: -1, messages: tagged(tag, 3).map((value) => ({ value, partition: 0 })) });
      await txn.commit();
    } catch (e) {
      err = e;
    } finally {
      await p.disconnect().catch(() => {});
    }
    expect(err, `the transaction with ${SEC_TXN_DENIED} committed`);
    // kafkajs asks every broker for the transaction coordinator and, each answering
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED, throws KafkaJSGroupCoordinatorNotFound: the
    // broker's error code reaches only its log, so the log is checked too.
    const answered = brokerErrors.some((l) => /GroupCoordinator/.test(l.message) && l.error === 'Transactional Id authorization failed');
    expect(err.type === 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED' || (err.name === 'KafkaJSGroupCoordinatorNotFound' && answered),
      `want TRANSACTIONAL_ID_AUTHORIZATION_FAILED, got ${err.type || err.name}: ${err.message}`);
    expectEq(await secRead(tag, 0, true), [], 'records of the denied transaction under read_uncommitted');
    return `transaction with ${SEC_TXN_DENIED}: ${err.type || `${err.name} after FindCoordinator answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED`}; read_uncommitted sees none of it`;
  },

  async sec_bad_credentials() {
    let conf;
    let what;
    if (SASL) [conf, what] = [security('not-the-password'), 'a wrong SASL password'];
    else if (TLS) [conf, what] = [security(undefined, false), 'no client certificate'];
    else return 'n/a: PLAINTEXT has no credentials';
    const admin = new Kafka({ ...conf, clientId: 'onelog-compat-bad', brokers: BOOTSTRAP, logLevel: logLevel.NOTHING, retry: { retries: 0 } }).admin();
    try {
      await admin.connect();
      await admin.fetchTopicMetadata({ topics: [SEC_TOPIC] });
    } catch (e) {
      const text = `${e.name}${e.type ? ` ${e.type}` : ''}: ${e.message}`;
      expect(/SASL|authentic|certificate|socket hang up|ECONNRESET|alert/i.test(text), `want an authentication or TLS error, got ${text}`);
      return `${what}: ${text.slice(0, 200)}`;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    throw new Error(`metadata with ${what} succeeded`);
  },
};

async function main() {
  const only = (process.env.COMPAT_SCENARIOS || '').split(',').filter(Boolean);
  const ids = SECURITY_SUITE ? SECURITY_SCENARIOS : SCENARIOS;
  const impls = SECURITY_SUITE ? securityScenarios : scenarios;
  for (const s of ids) {
    if (only.length && !only.includes(s)) continue;
    const started = Date.now();
    process.stderr.write(`[kafkajs] ${s} ...\n`);
    let timer;
    try {
      const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`scenario still running after ${TIMEOUT_S} s`)), TIMEOUT_S * 1000); });
      const detail = await Promise.race([impls[s](), timeout]);
      emit(s, 'pass', detail || '');
    } catch (e) {
      process.stderr.write(`${e.stack}\n`);
      // An aggregate error (createTopics) carries the per-topic broker errors.
      const inner = (e.errors || []).map((x) => `${x.type || x.name}: ${x.message}`).join('; ');
      emit(s, 'fail', `${e.name}${e.type ? ` ${e.type}` : ''}: ${e.message}${inner ? ` (${inner})` : ''}`.slice(0, 400));
    } finally {
      clearTimeout(timer);
    }
    process.stderr.write(`[kafkajs] ${s}: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }
  // Abandoned scenarios may hold sockets open: leave now.
  process.exit(0);
}

process.on('unhandledRejection', (e) => process.stderr.write(`unhandled: ${e && e.stack}\n`));
main();
