/** `agentvisor COMMAND --help`: what each command does, its flags, and examples. */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  run: `agentvisor run TASK [--json] [--db PATH] [--approval prompt|defer|auto] [--nats URL] [--inspect [URL]]

Starts a run of the task file TASK (JSON or YAML) and drives it until it finishes or pauses.
Progress goes to stderr; with --json the last line of stdout is {"runId","status","steps","error"?}.

  --json              print the result as JSON on stdout
  --db PATH           the store (default $AGENTVISOR_DB, else .agentvisor/agentvisor.db)
  --approval MODE     who answers asks: prompt (the terminal), defer (pause, exit 3), auto
  --nats URL          send child runs to agentvisor workers over NATS (docs/nats.md)
  --inspect [URL]     stream XState inspection events to a Stately inspector relay

A PostgreSQL store that goes away mid-run is waited for up to $AGENTVISOR_STORE_OUTAGE_MS ms
(default 60000), then the run is left interrupted for resume (docs/durability.md).

Exit codes: 0 succeeded, 1 other end, 2 bad input, 3 paused awaiting approval or an answer. Ctrl-C cancels.

examples:
  agentvisor run examples/single-agent/task.json
  agentvisor run task.yaml --approval defer --json
`,
  resume: `agentvisor resume RUN [--json] [--db PATH] [--nats URL] [--inspect [URL]]
agentvisor resume --all [--json] [--db PATH] [--nats URL] [--inspect [URL]]

Continues an interrupted or paused run under the same run id: a model call lost in a crash is
sent again, completed tool calls are never repeated (docs/durability.md). --all resumes every
interrupted run (status running, nobody driving it).

examples:
  agentvisor resume 0b7c1d2e-...
  agentvisor resume --all --json
`,
  runs: `agentvisor runs [--json] [--status S] [--db PATH]

Lists runs, oldest first. Interrupted runs show as "running (interrupted)".
S is one of running, awaiting_approval, awaiting_input, succeeded, step_cap, failed, cancelled, timed_out.

examples:
  agentvisor runs --status failed
  agentvisor runs --json
`,
  show: `agentvisor show RUN [--json] [--db PATH]

The full trace of a run: transitions, steps with their tool calls and results, a receipt for
every model-call attempt, policy events, approvals and child runs.

examples:
  agentvisor show 0b7c1d2e-...
  agentvisor show 0b7c1d2e-... --json | jq '.receipts'
`,
  answer: `agentvisor answer RUN [REQUEST] TEXT [--db PATH] [--json]

Answers a question the run's model asked with ask_human (docs/policy.md, "Questions"): its only
open question, or REQUEST's when it has several (agentvisor show lists them). The answer is the
call's result once the run goes on: continue it with agentvisor resume RUN.

examples:
  agentvisor answer 0b7c... "Use the staging bucket" && agentvisor resume 0b7c...
  agentvisor answer 0b7c... 5f1e... "No: keep the old name"
`,
  send: `agentvisor send RUN TEXT [--json] [--db PATH] [--nats URL]

Continues a finished run with a follow-up message as a new turn, under the same run id
(docs/policy.md, "Follow-ups"): the model gets the whole conversation so far, then TEXT, and works
on with a fresh maxSteps and timeout. Exit codes as for run.

examples:
  agentvisor send 0b7c... "Now add a section on costs"
  agentvisor send 0b7c... "Use the staging bucket instead" --json
`,
  fork: `agentvisor fork RUN --at SEQ [--json] [--db PATH] [--nats URL]

Starts a new run from RUN's state after transition SEQ (agentvisor show RUN lists them) and
drives it like resume: its own id, its journal and conversation those of RUN at SEQ, requests
made by then copied (pending if decided later). RUN is not touched; the workspace is not
rewound (files are as they are now). A SEQ at which RUN had ended, or waited for its children,
is refused (exit 2). Exit codes as for run.

examples:
  agentvisor fork 0b7c... --at 4
  agentvisor fork 0b7c... --at 4 --json
`,
  replay: `agentvisor replay RUN|--all [--status S] [--task FILE] [--workspace DIR] [--keep] [--json] [--db PATH]

Re-drives an ended run from its start against its recorded model answers, with today's code,
policy and tools, in a scratch workspace (a copy of the run's workspace as it is now, or of
--workspace DIR) and a scratch store, and reports the first place it departs from the record: a
different tool call, policy decision, tool result, verification outcome or end (docs/replay.md).
--task FILE replays under today's task file (its policy, tools, verify, limits, instructions).
--all replays every ended run of the store (--status S: only those), oldest first, with a summary.
The store and the run's workspace are only read. --keep keeps the scratch store and workspace.
Exit 0 when every replay went the same way, 1 when one departed, 2 usage or an unknown run.

examples:
  agentvisor replay 0b7c...
  agentvisor replay 0b7c... --task task.json --json
  agentvisor replay --all --status succeeded
`,
  watch: `agentvisor watch RUN [--json] [--from SEQ] [--db PATH]

Tails a run's events from any process until the run finishes (docs/streaming.md): its recorded
events from transition --from (default 1), then each new one as the run's driver records it.
--json prints one JSON event a line. Ctrl-C stops watching; the run goes on. Exit 0 when the run
succeeded, 1 when it ended otherwise.

examples:
  agentvisor watch 0b7c1d2e-...
  agentvisor watch 0b7c1d2e-... --json --from 12 | jq -c 'select(.kind == "toolCall")'
`,
  approve: `agentvisor approve RUN [REQUEST] [--deny] [--remember] [--edit JSON] [--db PATH] [--json]
agentvisor approve RUN [REQUEST] --retry | --completed TEXT | --abort

Decides the pending approval requests of a paused run (all of them when REQUEST is omitted);
then continue it with agentvisor resume RUN. --remember keeps the decision for later runs of the
same workspace; --edit approves the call with other arguments (checked against the policy
again). --retry, --completed and --abort settle an exec that was interrupted after it started.

examples:
  agentvisor approve 0b7c... && agentvisor resume 0b7c...
  agentvisor approve 0b7c... 5f1e... --deny
  agentvisor approve 0b7c... --edit '{"path": "draft.txt", "content": "..."}'
  agentvisor approve 0b7c... --completed "the tag was created"
`,
  cancel: `agentvisor cancel RUN [--db PATH] [--json]

Cancels a run from any process: its driver kills the run's tool processes, aborts the model call
in flight and ends it cancelled. A paused or interrupted run is ended at once.

example:
  agentvisor cancel 0b7c1d2e-...
`,
  worker: `agentvisor worker --nats URL [--db PATH] [--concurrency N] [--tools MODULES] [--submit-template FILE] [--store-outage-ms N] [--inspect [URL]]

Drives child runs from the NATS work queue (shared by every worker) and answers control
requests (status, pending, approve, answer, cancel, tree) until SIGINT/SIGTERM. Logs one line
per run it starts and ends. --tools: comma-separated tool modules (defineTool exports) its runs
may be offered (docs/tools.md). --submit-template: also take root runs submitted on
agentvisor.runs.submit, laid over that task file and never allowed more than it (docs/nats.md,
"Submitting runs"). --store-outage-ms: how long a PostgreSQL outage is ridden out (default
60000, or $AGENTVISOR_STORE_OUTAGE_MS); a run interrupted past it is resumed here once the store
answers again (docs/durability.md). Connection options: AGENTVISOR_NATS_TOKEN, _USER/_PASS,
_CREDS, _TLS_CA/_CERT/_KEY.

examples:
  agentvisor worker --nats nats://127.0.0.1:4222 --db /shared/agentvisor.db --concurrency 4
  agentvisor worker --nats nats://127.0.0.1:4222 --db postgres://... --submit-template team.json
`,
  inspect: `agentvisor inspect [RUN] [--port N] [--host H] [--no-token] [--db PATH]

Serves the web inspector: runs, the state chart with the current state lit, the timeline
(step back through it), receipts, policy events, approvals with Approve/Deny, child runs.
Listens on 127.0.0.1:4380 by default (--port 0 picks a free port) and prints the one URL to
open, http://127.0.0.1:PORT/?token=...: a secret token made at start, required of every page
load, API call and event stream (as the page's cookie or Authorization: Bearer TOKEN).

  --port N      the port (default 4380; 0 picks a free one)
  --host H      the address to listen on (default 127.0.0.1)
  --no-token    no token: anyone who reaches the port can read runs and decide approvals
  --db PATH     the store to read

examples:
  agentvisor inspect
  agentvisor inspect 0b7c1d2e-... --port 0
`,
  'mock-llm': `agentvisor mock-llm --scenarios FILE [--port N] [--record FILE]

A scripted OpenAI- and Anthropic-compatible server for demos and tests (docs/mock-llm.md).
It prints one line: mock-llm listening on http://127.0.0.1:PORT/v1

example:
  agentvisor mock-llm --scenarios examples/single-agent/scenarios.json --port 4010
`
}
