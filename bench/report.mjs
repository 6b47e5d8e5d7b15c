// Writes docs/benchmarks.md from bench/results.json (run.mjs calls it; it also runs alone).
import { readFileSync, writeFileSync } from 'node:fs'
const r = JSON.parse(readFileSync(new URL('./results.json', import.meta.url), 'utf8'))
const f = r.figures
const spread = (x) => (x ? `${x.min}–${x.max} (±${x.spreadPct}%)` : 'n/a')
const yes = (b) => (b === null ? 'not measured' : b ? 'yes' : '**no**')
const ratio = (x) => (x === null || x === undefined || Number.isNaN(x) ? '?' : `${x}×`)
/** The ratios of a target's interleaved pairs (run.mjs), lowest to highest. */
const pairSpread = (key) => {
  const pairs = f.ratioPairs?.[key]
  return pairs === undefined ? 'n/a' : `${[...pairs.samples].sort((a, b) => a - b).join(', ')} (median ${pairs.median}×)`
}
const rows = [
  [
    'µs per step, agentvisor, no tool (the model answers text, verification fails, the next step)',
    f.noToolPerStep?.median ?? 'n/a',
    spread(f.noToolPerStep),
    `≤ 1.5× floor (${ratio(r.ratios.noToolOverFloor)})`,
    yes(r.met.noTool ?? null),
    `one commit a step of 4 statements in \`run_log\` (the receipt settled, the step row with its feedback folded in, the next receipt, the journal entry of 2 transitions with one snapshot) and its key index; on SQLite the run's row is written only when the status changes or 50 ms have passed (docs/durability.md, "The run's row"); the floor: 3 INSERTs on 2 B-trees. The ratio of each interleaved pair: ${pairSpread('noToolOverFloor')}`
  ],
  [
    'µs per step, raw floor (xstate + 1 prepared INSERT per transition, 1 tx per step)',
    f.floorPerStep.median,
    spread(f.floorPerStep),
    '(baseline)',
    '',
    `with one tx per transition: ${f.floorPerStepTxPerTransition.median} µs/step`
  ],
  [
    'µs per step, agentvisor, one `list_dir` a step (3 durable transitions)',
    f.perStep.median,
    spread(f.perStep),
    `≤ 1.3× (floor + the same tool) (${ratio(r.ratios.perStepOverFloorWithTool)})`,
    yes(r.met.perStep),
    `one commit a step, like the floor, of 4 statements in \`run_log\` and its index (the receipt settled, the step row with its results, the next receipt, the journal entry of 3 transitions, one snapshot; the run's row left for later, as above); the floor: 3 INSERTs on 2 B-trees. The ratio of each interleaved pair: ${pairSpread('perStepOverFloorWithTool')}`
  ],
  [
    'µs per step, floor + the same `list_dir` in its loop',
    f.floorWithToolPerStep?.median ?? 'n/a',
    spread(f.floorWithToolPerStep),
    '(baseline)',
    '',
    `the tool alone: ${f.toolWorkPerStep?.median ?? '?'} µs a call; agentvisor's step minus the tool alone: ${f.orchestrationPerStep?.median ?? '?'} µs (${ratio(r.ratios.orchestrationOverFloor)} the floor)`
  ],
  f.coldPerStep === undefined
    ? undefined
    : [
        `µs per step, the first ${f.coldPerStep.steps} steps after a full GC (no-tool; \`list_dir\`)`,
        `${f.coldPerStep.noTool.median}; ${f.coldPerStep.listDir.median}`,
        `${spread(f.coldPerStep.noTool)}; ${spread(f.coldPerStep.listDir)}`,
        '(information)',
        '',
        `the start of the untimed run before each timed one: ${ratio(f.coldPerStep.noToolOverFloor.median)} the floor's ${f.coldPerStep.floor.median} µs, and ${ratio(f.coldPerStep.listDirOverFloorWithTool.median)} the floor + tool's ${f.coldPerStep.floorWithTool.median} µs, over the same first steps. A full collection makes V8 throw away optimized code (\`--trace-deopt\`: functions of the driver, the writer, Effect's fiber loop and XState, "weak objects"), and the code that runs next starts over from its warm-up: measured (2026-12-02) inside one 8,000-step no-tool run right after a full GC, ~190–240 µs a step over its first 500 steps, a steady ~125–135 µs only after ~2,000 (XState's transitions the slowest to come back: ~2× their steady cost over the first 1,000 steps); the floor's little code re-warms within a few hundred. A process whose runs overlap keeps their code warm; one that drives a single run at a time pays this after each full collection`
      ],
  [
    'µs per step, LangGraph.js + SqliteSaver, the same tool',
    f.langgraphPerStep.median,
    spread(f.langgraphPerStep),
    `≥ 3× agentvisor (${ratio(r.ratios.langgraphOverAgentvisor)})`,
    yes(r.met.langgraph),
    'LangGraph writes one checkpoint per step and no receipts or step rows; agentvisor writes one transaction a step: its journal entry, the receipts and the step row'
  ],
  [
    'steps/s, 1,000 concurrent runs of 10 steps',
    f.concurrentStepsPerSec.median,
    spread(f.concurrentStepsPerSec),
    '≥ 6,000',
    yes(r.met.concurrent),
    "one main thread drives every run (XState, the driver, the tools, Effect at the waits) while the store's commit thread makes the group commits on a connection of its own (docs/durability.md, \"Group commit\"), handed over every 64 commits so that the first runs' next steps are ready when it is done; since 2026-12-03 a run created while others are driven joins their group commit (measured: the main thread 109-148 µs a step against 147-183 when each run made its own transaction there, ~90 µs of its start). The timed batch is a fresh process's fourth (three warm-up batches, `BENCH_WARM_BATCHES`): measured (2026-12-03, `--trace-opt`) V8 compiles ~400 functions in the first batch and ~140 in the second (~1.7 s of the compiler threads' CPU inside a ~2.2 s batch, on two cores), ~40-55 in each after, and steps/s rise from the first batch to a plateau from the third. Later on 2026-12-03 new runs got time-ordered ids (docs/durability.md, \"Run ids\") and a group commit started crossing to the commit thread as one flat array of bound values instead of objects (docs/durability.md, \"Group commit\"): measured against the build before, 8 fresh processes each, alternating, CPU per step of the fourth batch read from `/proc`: the commit thread ~40% of the main thread's CPU instead of ~70% (35-60 µs a step against 62-101), every thread together a median of ~260 µs a step against ~306, steps/s a median of ~6,300 against ~5,640 (host speed varied ~1.7× between runs, so only the medians and the per-run ratios mean anything). What is left, by thread (the same runs): the main thread ~115-140 µs a step, the commit thread ~45-60, V8's four helper threads ~70 together, libuv's pool (the tool's `readdir`) and the checkpointer ~10. On the main thread, from a CPU profile: GC ~18% (`--trace-gc-nvp`: ~32 KB allocated a step, ~8 KB survives a scavenge and ~7 KB is promoted, since a run's state between its steps lives through a round of the thousand runs, ~170 ms, longer than the ~85 ms between scavenges), Effect's fibers at the waits ~13%, the tool's system calls ~8% (`readdir`, and the `readlink` that checks the run's held root is still its workspace), encoding and handing over the commits ~5%, the rest the driver and XState. V8's parallel scavenger runs five tasks (Node's default pool of four threads, plus the main thread) on two cores: turning it off (`--no-parallel-scavenge`) took ~45 µs a step off the helper threads and added ~8 to the main thread. A young generation four times larger (`--max-semi-space-size=64`) let a round's state die young: 7,100-7,750 steps/s at ~225-245 µs a step, but it doubled the idle RSS per run (66 KB against 33), so the bench, like the `agentvisor` command, runs Node with its defaults"
  ],
  ...(f.concurrentCpuUsPerStep === undefined
    ? []
    : [
        [
          'CPU µs per step, same, every thread of the process',
          f.concurrentCpuUsPerStep.median,
          spread(f.concurrentCpuUsPerStep),
          '',
          '',
          "`process.cpuUsage()` over the timed batch: the main thread, the commit thread, V8's GC and compiler threads, libuv's pool (the tool's `readdir`), the checkpointer. On two cores, steps/s can be at most 2,000,000 / this; how near it comes depends on how much of the cores the host gives the process meanwhile (a shared host's steal time, read from `/proc/stat`, was up to half the cores during runs on 2026-12-03), so this is the figure to compare builds by"
        ],
        ...(f.concurrentMainCpuUsPerStep === undefined
          ? []
          : [
              [
                'CPU µs per step, same, the main thread',
                f.concurrentMainCpuUsPerStep.median,
                spread(f.concurrentMainCpuUsPerStep),
                '',
                '',
                'from `/proc/self/task/PID/stat`'
              ]
            ])
      ]),
  ['peak RSS (MB), same', f.concurrentPeakRssMb.median, spread(f.concurrentPeakRssMb), '', '', ''],
  [
    'KB RSS per idle run (1,000 runs waiting in a model call)',
    f.rssPerRunKb.median,
    spread(f.rssPerRunKb),
    '≤ 40',
    yes(r.met.rssPerRun),
    "per run: three Effect fibers with their stacks (the run, its drive, the forked model call), an XState actor with its own actor system (started from a copy of the input's first snapshot), the driver's closures, the parsed contract and conversation, the compiled policy, the provider, the held workspace root; the rest of the RSS is malloc and V8 page overhead"
  ],
  [
    'ms to resume 1,000 interrupted runs',
    f.resume1000Ms.median,
    spread(f.resume1000Ms),
    '< 1,000',
    yes(r.met.resume),
    "each resume reads the run, its last journal entry (one index seek in `run_log`), its steps and its receipts' sums (where its usage tally starts; through Kysely until 2026-12-02, which cost ~30% of a resume) and takes its lease with prepared statements (one transaction each); the stored contract is checked by hand on its common shapes (contract-check.ts, the Schema for anything else); the workspace opened with two synchronous system calls; all on one thread"
  ],
  [
    'ms per step, agentvisor on PostgreSQL, one `list_dir` a step',
    f.postgresPerStepMs?.median ?? 'n/a',
    spread(f.postgresPerStepMs),
    '≤ 1 ms',
    yes(r.met.postgresPerStep ?? null),
    "one statement a commit (`agentvisor_commit`, or `agentvisor_commit_deferred` for a commit that leaves the run's row for later, see below), nothing else a step but the run's row refreshed about every 50 ms and a lease-keeper poll every few seconds: a round trip to the server and the server's work on one row a step (since migration 2026-12-02T200000 the step row carries the answer's settlement, the next receipt and the journal entry: docs/durability.md, \"How a run is stored\"; before, 4 rows, one of them an UPDATE) and the run's row locked; the bench process and the server share the machine's cores. Where a step's time goes, measured (2026-12-02, a 5,000-step run on the bench's server, CPU profile and /proc): ~520 µs a step of which the bench process waits ~280 µs for the server's answer (the server's CPU ~150-180 µs a step, the rest two wake-ups of a process on another core), ~50 µs in the socket write (TCP on 127.0.0.1 in this VM: the kernel does the receiving side's work too), ~40 µs in `pg` (the query's config copied, the parameters serialized, the answer's row description parsed), ~15 µs GC, the tool's ~20 µs, the driver's own ~100 µs like on SQLite. Measured toward the target (2026-12-02): the foreign keys of `attempts`, `steps` and `journal_entries` to `runs` dropped on PostgreSQL (the commit functions' fence proves the run exists; the repositories check it for any other writer; a trigger the commit functions would skip cost as much as the keys, 170 vs 175 µs): the server's CPU 160 to 145 µs a step and a step 4.6% faster, paired A/B of the two builds on one server (30 µs and ~7% in a first run). Measured later that day: the settlement's UPDATE, left out of the commit as an experiment, ~6% of a step and ~50 µs of the server's CPU (paired, `bench/ab-postgres.mjs`); the commit as one statement of data-modifying CTEs with 29 parameters instead of the PL/pgSQL function's 48: no gain above the noise (0.98 and 1.10 in two paired runs of 11 pairs); the fence's row lock: no cost measurable (the function in a bare loop with and without it); a commit of one row ~45 µs of the server's CPU against ~110 for the function's four rows and its lock (bare loop, one connection). Then (2026-12-02, late): the step's commit as one step row carrying the answer's settlement, the next receipt and the journal entry, behind views that read as the tables did: a step 0.886 of the build before (median of 21 paired runs, `bench/ab-postgres.mjs`; 0.945 and 0.932 in runs of 11 pairs on a noisier phase), the server's CPU 250 µs a step instead of 310. What is left is the round trip itself: two wake-ups of a process on the other core of this VM and the server's fixed cost of a call (its parse, the plan's start, the fence's lock, the commit), ~100 µs of the server's CPU a commit in a bare loop of the function, ~2.5 times that inside the bench process's step (the backend and the bench share two cores and their caches)"
  ],
  [
    'ms per step, LangGraph.js + PostgresSaver, the same tool',
    f.postgresSaverPerStepMs?.median ?? 'n/a',
    spread(f.postgresSaverPerStepMs),
    `≥ 4× agentvisor on PostgreSQL (${ratio(r.ratios.postgresSaverOverAgentvisor)})`,
    yes(r.met.postgresSaver ?? null),
    `per step PostgresSaver commits the node's writes (BEGIN, an upsert per write, COMMIT) and the checkpoint (BEGIN, an upsert per changed channel's blob, the checkpoint, COMMIT): two transactions, about ten round trips. The ratio of each interleaved pair: ${pairSpread('postgresSaverOverAgentvisor')}`
  ],
  f.childOverheadMs
    ? [
        `ms overhead per child (NATS, ${f.fanOut.children} children, ${f.fanOut.workers} workers)`,
        f.childOverheadMs.median,
        spread(f.childOverheadMs),
        '',
        '',
        `fan-out ${f.fanOutMs.median} ms vs ${f.fanOutDirectMs.median} ms for the same children in-process. CPU over all processes: ${f.childCpuOverheadMs.median} ms more per child (in wall time, the workers running on other cores hide part of it). Per child a worker inserts the row, resumes the run from the store, publishes each transition and acks over NATS (about twice the CPU of an in-process run); three processes take turns at one SQLite file's write lock, and SQLite's busy sleeps (1–10 ms) block a worker's whole event loop; the parent re-reads all its children from the store on every child's done message`
      ]
    : ['ms overhead per child (NATS, 100 children, 2 workers)', 'n/a', 'n/a', '', 'not measured', 'not measured'],
  [
    'ms, `agentvisor runs --json` on 10,000 runs (cold process)',
    f.cliColdStart.median,
    spread(f.cliColdStart),
    '< 400',
    yes(r.met.cli),
    `a bare \`node -e 0\` takes ${f.nodeColdStart.median} ms here; on a current SQLite store \`runs\` loads better-sqlite3 and a few small modules (no Kysely, no Effect) and SQLite writes the JSON of 10,000 rows itself`
  ]
]
// Why a target is missed, for those this run missed (the figures say by how much).
const WHY = {
  noTool:
    "- **The no-tool step against the floor.** The floor is one XState send and one INSERT per transition in one transaction a step; agentvisor's step also settles the receipt and writes the next one before the call (so a crash never loses the fact that a call went out), the reply's step row with the verification's feedback and the journal entry, and its verification reads the workspace through the confined walk (two system calls on the run's held root). Measured (2026-12-01, warmed, this machine): the commit ~70 µs of a ~140–150 µs step (its statements replayed alone through better-sqlite3: ~57 µs, against ~41 µs for the floor's three INSERTs; the rest the writer's binding and the journal entry's JSON), XState ~6.5 µs a transition (two a step) and ~60% of the ~35 KB the step allocates (its Sets, Maps and snapshots; since 2026-12-02 the machine's transition cache makes a step's transitions ~2 µs in all, and a step allocates ~19 KB), the verification's `readlink` and `lstat` ~10 µs. Inside the bench process, whose heap also holds LangGraph.js, that allocation costs more collection than in a process of its own (~176 against ~150 µs a step, the same code): the floor allocates a fraction of it. The ratio moves by ±0.2 from one pair of repetitions to the next on this machine: read the pairs (`figures.ratioPairs`).",
  perStep:
    "- **The tool step against the floor with the same tool.** Both sides run the same `list_dir`; what agentvisor adds, measured (CPU profile, 2026-12-01): its commit of 4 statements (the receipt settled, the step with its results, the next receipt, the journal entry; the run's row left for later, docs/durability.md) about a third of the step, XState's three transitions through a machine of guarded, assigning transitions (the floor's machine has neither) about a quarter (until 2026-12-02: the machine's transition cache, packages/actors/src/machine/transition-cache.ts, takes them to ~2 µs a step, and a step 20-25% less, paired A/B), and the tool's bookkeeping around the listing (the step's policy plan, the journal's look at the call, the result records) about a seventh. A multi-row INSERT of the step, the next receipt and the entry measured no cheaper than three prepared statements (75 bound values, most NULL). The ratio follows the host more than the code: on 2026-12-02 the same code measured 1.16× on a host whose floor + tool step took ~155 µs, and 1.34-1.39× on one (the same machine kind, later that day) whose floor + tool step took ~76 µs, agentvisor's step above the floor staying ~27 µs on both: what agentvisor adds is CPU work of a fixed size, the floor is mostly the WAL write, whose cost moves with the host's I/O.",
  langgraph:
    "- **Against LangGraph.js + SqliteSaver.** LangGraph's SqliteSaver writes one checkpoint per step and nothing else; agentvisor writes receipts, step rows and three transitions a step.",
  concurrent:
    "- **6,000 steps/s in one process.** That rate allows ~170 µs of the main thread a step, start-up included. Since 2026-12-02 the group commits run on the store's commit thread (docs/durability.md, \"Group commit\"), which took ~15% off the main thread's work a step (measured in one process run, interleaved batches: ~4,900 -> ~5,800 steps/s). Since the machine's transition cache (2026-12-02) XState is ~5% of it instead of ~20%. Since 2026-12-03 a run created among others joins their group commit: its own transaction on the main thread had cost ~90 µs of it (measured, 10 alternating fresh processes a build: the main thread's CPU 109-148 µs a step against 147-183, 4,941-7,120 steps/s against 4,296-5,615; it had been tried on 2026-12-01 and dropped for an idle run's memory, which came from the commit thread's ~20 MB: creations alone now never start it). What is left is the main thread's (CPU profile of the timed batch, 2026-12-03): GC ~27% by the `gc` performance entries (each run's state between two steps lives through a round of the thousand runs, ~170 ms, and so survives the collections in between: ~10.6 KB a step survives one, by the sampling heap profiler), Effect's fibers at the waits ~13%, the tool's system calls ~8% (`readdir`, and the `readlink` that checks the run's held root is still its workspace), the commits' hand-over ~7% (a structured clone), the driver and XState. The host's phase moves the figure by ±30%: on a slow phase (its floor step ~120 µs instead of ~55) the same build measured 4,300-5,500 steps/s, on a fast one 6,000-8,000. More throughput comes from more processes (`agentvisor worker`s, PostgreSQL).",
  rssPerRun: '- **Idle RSS per run.** See the row: fibers, the actor system, the parsed contract and the conversation of each run.',
  resume:
    "- **Resume of 1,000 runs.** Each resume is a few reads (the run, its contract, its last journal entry, its steps, its receipts' sums), a lease acquisition and a machine restored, on one thread; what is left of it is mostly Effect (the resume's steps are Effects: ~190 µs of a ~860 µs resume in a CPU profile of 2026-12-02), SQLite's reads, GC, the stored contract's check and the actor's restore; the figure moves between ~0.75 and ~1.4 s from one repetition to the next on this machine (see the spread) with the same code.",
  cli: '- **CLI cold start.** Most of it is Node’s own start-up (see the row).',
  postgresPerStep:
    '- **1 ms a step on PostgreSQL.** A step is one round trip to the server and the server’s work on the rows of the step. The run’s driver costs what it costs on SQLite (the `list_dir` row); the `pg` client ~70–100 µs of CPU a commit (48 parameters written, the reply read). The server, measured after migration 2026-12-01T170000 (a profile of the backend over 1,000 commits of this run, 2026-12-01): the executor’s start of the five statements (the head’s fenced UPDATE, the settlement, the step, the next receipt, the journal entry) about a fifth, the foreign-key check of each of the three inserts (a query on the run’s row) a quarter (dropping them took ~100 of ~400 µs of the backend’s CPU a commit), the transaction’s commit a tenth, the reply and the WAL writer’s wake-up a tenth; the rest is the rows’ heap, index and WAL writes. On a shared 2-core machine the round trip also waits for a core twice, the server’s backend then the bench process, which on a loaded machine costs more than the server’s work. Below that takes per-step tables without foreign keys (a change of what the store enforces) or fewer rows a step (a store format change).',
  postgresSaver:
    "- **Against LangGraph.js + PostgresSaver.** Both pay alike the same tool call and the driver around it (~0.2 ms, as on SQLite) and a round trip a step to the same server; agentvisor's step is one statement (~0.5 ms a step), PostgresSaver's two transactions of about ten round trips (~2.0 ms). Since 2026-12-02 a commit that changes no status leaves the run's row for a refresh about every 50 ms (`agentvisor_commit_deferred`, docs/durability.md, \"The run's row\"): no new version of the row a step. Of the server's CPU a commit, the foreign-key check of each of its three inserts was about a sixth (measured: 15-30 µs of 150-180): since migration 2026-12-02T160000 those keys are gone on PostgreSQL, their check made by the commit functions' fence and, for any other writer, by the store's repositories (a row of a run that does not exist is still refused, as its tests assert; docs/durability.md). The pairs move by ±5% from one to the next on this machine: read them. Measured on 2026-12-02 (one process, 2,000-step runs): the commit's round trip, awaited, is ~280-380 µs of a ~370-550 µs step, while a plain prepared INSERT of the same ~1.4 KB over the same connection kind takes ~67 µs and a `select 1` ~22 µs: most of the step is the server running the commit function (PL/pgSQL: the fence's row lock, then four row writes with their index entries; one since migration 2026-12-02T200000, a step ~11% faster). On a slow phase of this host (2026-12-02 evening: the SQLite floor step ~120 µs instead of ~55, PostgresSaver's step 2.0-3.2 ms) the pairs spread 2.5-4.1×: both sides are mostly waits for a core and for the server, and they move apart. Since the one-row step commit (migration 2026-12-02T200000: a step ~11% faster and ~60 µs less of the server's CPU, paired A/B of 21 pairs), two runs of the bench 17 minutes apart on that slow phase (2026-12-03) measured 4.89× (pairs 4.05-5.44) and 3.74× (pairs 3.62-4.03): the ratio sits about 4. What is left of agentvisor's step (540-990 µs on that phase), measured in it (2026-12-03, /proc, a CPU profile and the commit's round trip timed): the server's CPU 180-290 µs, the round trip's two wake-ups of a process on the other core of this VM (~260 µs together: a commit awaited ~550 µs against ~290 of the server's CPU), `pg` and the socket write ~100 µs of the bench process, the driver ~100 µs. A commit of the same function in a bare loop costs the server ~115 µs: inside the step, where the bench process and the backend share two cores and their caches, twice that. The levers left are the round trip's (fewer wake-ups: none without a busy-polling client) and the call's fixed cost in the server (its bind, the PL/pgSQL entry, the fence's lock, the commit record). Measured on 2026-12-03, per thread from /proc: in a 3,000-step run after one of 2,000, agentvisor's main thread 180-290 µs a step, and V8's compiler threads another ~120-170 µs (`--trace-opt`: ~100 functions compiled in the timed run, ~0.8 s of compilation, competing for the two cores with the main thread and the backend); after 20 warm-up runs 36 compilations remained and the step took ~410 µs. A full GC before a run (the bench's, so that one side's garbage is not collected in the other's timing) makes V8 drop the code it had compiled for the objects of runs that are gone (`--trace-deopt-verbose`: ~20-50 code objects a GC, \"weak objects\"), and it is compiled again inside the next run: 14 runs of 1,000 steps with a GC before each stayed at ~0.9-1.1 ms a step, without it they came down to ~0.4-0.5 ms. So each side of a pair now runs 5,000 steps untimed after its GC (it was 2,000). Even so one process measured agentvisor's step anywhere in 354-1,265 µs from one run to the next (the same build, the same warm-up): this host's noise, which the seven pairs' median is for."
}
const missed = Object.entries(r.met)
  .filter(([key, met]) => met === false && WHY[key] !== undefined)
  .map(([key]) => WHY[key])
const m = r.machine
const md = `# Benchmarks

\`npm run bench\` (not part of \`npm test\`) runs \`bench/run.mjs\`: the bench is its own npm package
(\`bench/package.json\`, not a workspace), so LangGraph.js and its SQLite and PostgreSQL checkpointers
are installed only there. Every scripted provider answers at once, so only orchestration is measured. Each
figure is the median of several repetitions (spread: min–max, and half the range over the
median); ratios are against baselines measured in the same process run. The single-run figures
(floor, no-tool step, \`list_dir\` step, LangGraph.js) are measured interleaved, one repetition of
each in turn, and each ratio of a target is the median of the ratios of the pairs measured one
right after the other (\`figures.ratioPairs\` in the results): a change of the machine's load
between two scenarios moves both sides of a pair. Each of them starts on a collected heap, then
runs untimed for ${f.coldPerStep?.warmSteps ?? f.coldPerStep?.steps ?? 300} steps of the same scenario (the JIT's warm-up after that
collection; what its first ${f.coldPerStep?.steps ?? 300} steps cost has a row of its own), then the timed run. agentvisor's runs
are driven one after another on one long-lived \`Agentvisor\` per scenario, as a process that serves
runs keeps one store open. All figures are in \`bench/results.json\`.

Machine of the figures below: ${m.cpu}, ${m.nproc} cores (\`nproc\`), ${m.memTotalGb} GiB RAM, Node ${m.node}, ${m.platform}.
Measured ${r.at}, in ${r.durationS} s, with ${r.repetitions.pairs ?? r.repetitions.light} interleaved repetitions of the
${r.repetitions.steps}-step runs and ${r.repetitions.throughput ?? r.repetitions.heavy} of the ${r.repetitions.runs}-run throughput (${r.repetitions.heavy + 1} of idle/resume),
to stay within ~10 minutes. Load average while it ran: ${r.loadAverage?.start ?? '?'} at the start, ${r.loadAverage?.end ?? '?'} at the end
(on ${m.nproc} cores); other jobs shared the machine, so absolute figures are noisy: read the spreads.

\`\`\`
${m.free}
\`\`\`

| figure | median | spread | target | met? | what limits it |
|---|---|---|---|---|---|
${rows
  .filter((x) => x !== undefined)
  .map((x) => `| ${x.join(' | ')} |`)
  .join('\n')}

## Scenarios

1. One run of ${r.repetitions.steps} steps: a scripted provider whose every step asks for one \`list_dir\` of \`.\`,
   \`limits: { maxSteps: ${r.repetitions.steps + 1}, dispatchCeiling: 100000 }\`, no verify: each step is 3 transitions
   (dispatching → acting → verifying → dispatching), one journal entry with one snapshot, committed
   before any effect that follows it (see "The hot path" below: one transaction a step). Per
   transition: ${r.perTransitionUs} µs. The floor: an XState actor of three states, \`send\` +
   \`getPersistedSnapshot\` + one prepared INSERT per transition, WAL + \`synchronous=NORMAL\`, one
   transaction per step (the same better-sqlite3 and xstate agentvisor loads). The tool step is
   compared with the floor running the very same \`list_dir\` (agentvisor's own tool, called directly)
   in its loop before each step's transaction: one loop, one measure, not two added.
   The no-tool step: a scripted provider with no steps (it answers the text \`done\` at every
   dispatch), \`verify: { fileContains: { path: "never-written.txt", text: "DONE" } }\` and
   \`maxSteps: ${r.repetitions.steps}\`: every step is a text reply, a failed verification with its feedback,
   and the next dispatch, until the run ends \`step_cap\`; compared with the floor without a tool.
2. 1,000 runs of 10 tool steps (11 model calls each) started at once in one process, embedded
   bus: steps per second over the whole batch, peak RSS sampled every 20 ms; each repetition a
   fresh process, the figure their median (five since 2026-12-03: the batch moved by ±30% from
   one process to the next on this host, two made the median a mean of two draws). Before it, in the
   same process and store, ${r.repetitions.throughputWarmBatches ?? 1} untimed batch(es) of as many such runs warm the JIT (and the
   store's commit thread) up, as a process that has been serving runs is (measured 2026-12-03 with
   \`--trace-opt\`: V8 compiles ~400 functions in a fresh process's first batch, ~140 in its second,
   ~40-55 in each after; steps/s 3,200-3,500, then 4,700-5,000, then a plateau of 5,000-6,400 from
   the third batch on; until 2026-12-03 one warm-up batch, so the timed batch was the second), with
   no forced GC between them (one measured ~5% fewer). Idle RSS per run:
   1,000 runs whose first model call waits an hour, RSS after GC minus RSS after \`open\` (each read
   a second after a full GC, once the freed pages are back with the OS), divided by 1,000 (each in
   a fresh process).
3. Those 1,000 runs interrupted by \`av.close()\`, then \`Promise.all(ids.map(id => av.resume(id)))\`
   in a new \`Agentvisor\` on the same file, timed until every resume has returned (every run is
   being driven again).
4. A parent fanning out ${f.fanOut?.children ?? 100} children to ${f.fanOut?.workers ?? 2} \`agentvisor worker\` processes (\`--concurrency ${f.fanOut?.workerConcurrency ?? 4}\`, the default)
   over a real nats-server (JetStream, 127.0.0.1), all three processes on one SQLite file. The parent
   (\`Agentvisor.open({ nats })\` in the bench process, \`children: { maxChildren: ${f.fanOut?.children ?? 100}, maxConcurrent: ${f.fanOut?.children ?? 100} }\`) asks
   in its first model call for ${f.fanOut?.children ?? 100} \`spawn_child\` calls; each child's only model call is answered at
   once with text (an \`agentvisor mock-llm\` process, per-goal replies), so a child's work is near zero.
   \`childOverheadMs\` = (wall time of the parent's \`av.run\`, start to \`succeeded\` − wall time of the
   same ${f.fanOut?.children ?? 100} child contracts run with \`av.run\` by an embedded \`Agentvisor\` in the bench process, no
   NATS, no parent, ${(f.fanOut?.workers ?? 2) * (f.fanOut?.workerConcurrency ?? 4)} at a time like the workers) / ${f.fanOut?.children ?? 100}: what the fan-out adds per child (queue, workers,
   shared store, the parent's wait and its own two steps). \`childCpuOverheadMs\`: the same difference
   in CPU time summed over every process (bench, workers, nats-server, mock), from \`/proc/PID/stat\`.
   nats-server, the mock and the workers start (and serve) before any timing, one untimed fan-out and one
   direct batch warm up first, and they are stopped by PID at the end. Both are measured in every
   repetition; a difference of two wall times on a shared machine is noisy (read the spread), and
   it can go below 0 where the two workers find idle cores that the single bench process cannot use.
5. The same loop in LangGraph.js 1.7.3 with \`@langchain/langgraph-checkpoint-sqlite\` 1.0.4 (WAL,
   \`synchronous=NORMAL\`): one node, looping on itself ${r.repetitions.steps} times (one checkpoint per step), calling the
   same \`list_dir\` as agentvisor's step (tool-work.mjs).
6. \`node packages/cli/bin/agentvisor.js runs --json --db FILE\` on a store of 10,000 runs, from
   spawn to exit, page cache warm.
7. PostgreSQL: the bench starts its own server (\`initdb\` into a temporary folder, \`postgres\` on a
   free 127.0.0.1 port, stopped by its PID at the end, as the test suite's setup does), with
   \`synchronous_commit=off\`, PostgreSQL's counterpart of the SQLite figures' \`synchronous=NORMAL\`
   (a commit does not wait for its WAL flush; a server crash may lose the last commits, never half
   of one; fsync stays on). On a fresh database each: agentvisor's ${r.repetitions.steps}-step \`list_dir\` run of
   scenario 1 (\`Agentvisor.open({ db: 'postgres://…' })\`, timed after the open that migrates it), and
   the loop of scenario 5 with \`@langchain/langgraph-checkpoint-postgres\` 1.0.5 (\`PostgresSaver\`,
   after its \`setup()\`), both calling the same \`list_dir\`, in the same process run: ${r.repetitions.postgres ?? r.repetitions.light} interleaved pairs, one of
   each in turn, each after a full GC and an untimed run of ${r.repetitions.postgresWarmSteps ?? f.coldPerStep?.warmSteps ?? 300} steps (V8 still compiles ~100 of
   agentvisor's functions in the 3,000 steps after a 2,000-step warm-up: measured 2026-12-03),
   the ratio the median of the pairs'.

## The hot path

What a step costs, and what was done about it (docs/architecture notes in the code):

- **Prepared statements, no query building.** On SQLite a run's writes and reads go through a
  \`RunWriter\` (\`packages/store/src/sqlite/sqlite-run-writer.ts\`): cached better-sqlite3
  statements in one synchronous \`BEGIN IMMEDIATE\` transaction, no Kysely, no promise. The
  fence is folded into the run's own update (\`WHERE id = ? AND lease_token = ?\`).
- **One statement a commit on PostgreSQL.** The PostgreSQL \`RunWriter\`
  (\`packages/store/src/postgres/postgres-run-writer.ts\`) sends a commit to \`agentvisor_commit\`, a
  PL/pgSQL function the store's migrations install: the head's UPDATE under the fencing token (the
  fence), every write, the journal entry, in one statement and one round trip, on raw \`pg\` with
  named (prepared) statements. The head, the writes every step makes (the settled receipt, the
  step row, the next receipt) and the journal entry go as typed arguments, each write one plain
  statement of parameters; any other write follows as one \`jsonb\` array. The status, reason and
  outcome rules are domains (a table CHECK is re-read and re-planned at every statement that
  writes the table) and a receipt's settlement updates it in place (no index on its outcome).
  Against the writes as \`jsonb\` taken apart by \`jsonb_populate_record\`, the CHECKs and that
  index (migration 2026-12-01T170000): ~40% less server CPU a step (paired, one process, on the
  bench's server on a loaded 2-core machine, 2026-12-01). Through Kysely the same commit was a
  transaction of a fenced SELECT, a statement per row and the head: about a dozen round trips.
  The same interface and the same tests as the SQLite writer.
- **A synchronous driver loop.** While nothing waits, the driver's loop is plain code: an entry
  work done at once returns its value, a commit SQLite makes at once is no Effect step, a provider
  that answers at once (a settled \`Exit\`) costs no fiber and no timer; Effect runs only where
  something waits (a provider call in flight, a tool's I/O, a store that answers later), which is
  where cancel and timeout interrupt (docs/architecture.md, "The hot path"). The provider gets the
  live conversation (no copy per dispatch), the in-process bus publishes nothing when nobody
  listens, and the file tools' confined walk is synchronous (no thread-pool round trips).
- **Pure transitions ride along; two commits for an effect.** A transition whose next state's
  entry work starts no effect of its own (falling over, a verification that only reads files,
  the checks before a dispatch, \`acting\`) is staged and committed with the next one: a step whose
  tools only read is one transaction (its reply, results, verification and the next receipt), a
  step with \`write_file\` or \`exec\` two (the reply with the journal's \`started\`, before the
  effect; then \`completed\`, the results and the next receipt), nothing with an effect started
  before all of it is durable. Observers hear of staged transitions only once they are durable.
- **A compact journal.** A commit's transitions are one journal entry with one snapshot (built
  without XState's walk of the context); the others are replayed through the pure machine for
  \`show\` and time travel (docs/durability.md, "The journal"). A step inserted and given its
  results in one commit is one INSERT; the run's status is written only when it changes (it is
  indexed).
- **One pass through the machine.** The driver sends each event once and compares snapshots,
  instead of asking \`can\` first (a second transition computation).
- **A transition cache.** XState selects each transition (its guards on the snapshot and the
  event); a transition it has taken once from a state, between atomic states with no entry, exit
  or eventless transitions (the whole tool loop), is not walked again: its next snapshots are
  XState's result of that first time with the context the transition's assignments compute,
  checked equal to XState's then (packages/actors/src/machine/transition-cache.ts). A step's three
  transitions ~2 µs instead of ~15, a step 20-25% less (paired A/B, 2026-12-02).
- **No full-state rewrite.** The contract lives in \`run_contracts\`, so the run row updated at
  every commit is a few hundred bytes; on SQLite a run's receipts, steps, journal entries and
  tool effects are the rows of one table kept in commit order (\`run_log\`, docs/durability.md,
  "How a run is stored"), so a step's commit writes the end of one table and one index leaf
  instead of the leaves of four tables; its CHECKs are \`=\` comparisons, not \`IN\` lists (SQLite
  builds a temporary index for an \`IN\` list of three or more at every statement); the snapshot
  holds counters only (~400 bytes).
- **Fixed statements.** Each kind of step write is one prepared statement naming every column it
  may set: no SQL text is built or looked up per write (a no-tool step's commit: 127 → 89 µs of
  CPU, measured A/B in one process, 2026-12-01).
- **Tools and checks answered at once.** \`read_file\`, \`list_dir\` and a verification of workspace
  files answer as plain values (no Effect, no fiber); a missing file is an answer, never an
  exception with a stack; a run holds its workspace root open for its life, so a check of a
  missing file is two system calls.
- **Checkpoints off the hot path.** The writer's connection turns SQLite's automatic checkpoint
  off; a worker thread with its own connection runs PASSIVE checkpoints every 500 ms.
- **Group commit.** With more than one run driven in a process, commits arriving in one turn of
  the event loop share one transaction, each run in its own savepoint (a fenced-out run rolls
  back alone).
- **One lease keeper per process.** One fiber renews every lease the process holds with one
  statement and polls all of them for takeovers and cancel requests with one query, instead of
  a watcher and two queries per run.
- **A cheap attempt deadline.** Effect's \`timeoutFail\` races two forked fibers and a clock (about
  70 µs); the driver forks the call once and arms a plain timer (about 10 µs), with the outcome
  and the cancel handling folded into that one wait.
- **Three fibers per idle run.** A run's fiber is forked from the launcher's runtime (not its
  fiber, which would stay pinned), races its drive against one stop signal without a fiber per
  side, and is awaited by the API through a fiber observer; runs without observers of their own
  share one list. A run just created skips recovery (no write, no read).
- **Lazy CLI.** Each command is imported on demand, and read-only commands load a narrow entry of
  the store; an up-to-date store skips the migrator (one query). \`runs\` on a current SQLite
  store reads it with better-sqlite3 alone (\`openCurrentSqlite\`): Kysely's ~260 modules and
  Effect are never loaded; a store that needs migrating, or PostgreSQL, goes the long way.

## Where the targets are missed, and why

${missed.length === 0 ? 'Every target is met in this run.' : missed.join('\n')}
`
writeFileSync(new URL('../docs/benchmarks.md', import.meta.url), md)
