// @ts-check
// The watchdog of `spawnTethered` (packages/cli/src/process/tether.ts; docs/cli.md, "Ending with
// the parent"): started as `node tether-watchdog.js SETTINGS COMMAND ARGS...` with the tether on
// fd 3, it runs COMMAND in a process group of its own and, when the tether reaches its end (the
// parent died, however), sends SIGTERM to that group, then SIGKILL after SETTINGS.graceMs. It
// passes signals on to COMMAND and exits as COMMAND does. Plain JavaScript, so it runs unbuilt.
import { spawn } from 'node:child_process'
import { Socket } from 'node:net'

const [settingsText, command, ...args] = process.argv.slice(2)
if (settingsText === undefined || command === undefined) {
  process.stderr.write('tether-watchdog: usage: tether-watchdog.js SETTINGS COMMAND [ARGS...]\n')
  process.exit(2)
}
/** @type {{ uid?: number, gid?: number, graceMs: number }} */
const settings = JSON.parse(settingsText)

const program = spawn(command, args, {
  stdio: ['inherit', 'inherit', 'inherit'],
  // Its own process group (and session): the group is what the watchdog ends, helpers included.
  detached: true,
  ...(settings.uid !== undefined ? { uid: settings.uid } : {}),
  ...(settings.gid !== undefined ? { gid: settings.gid } : {})
})

/** @param {NodeJS.Signals} signal */
const signalGroup = (signal) => {
  if (program.pid === undefined) return
  try {
    process.kill(-program.pid, signal)
  } catch {
    // the group is gone already
  }
}

const FORWARDED = /** @type {const} */ (['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGHUP'])
for (const signal of FORWARDED) process.on(signal, () => program.kill(signal))

program.once('error', (error) => {
  process.stderr.write(`tether-watchdog: cannot start ${command}: ${error.message}\n`)
  process.exit(127)
})
program.once('exit', (code, signal) => {
  // Whatever the program left running in its group ends with it.
  signalGroup('SIGKILL')
  if (signal === null) process.exit(code ?? 1)
  // Exit as the program did, by the same signal.
  for (const forwarded of FORWARDED) process.removeAllListeners(forwarded)
  process.kill(process.pid, signal)
  // A signal whose default is not to end a process (none of the usual ones) still ends this one.
  setTimeout(() => process.exit(1), 1000)
})

const tether = new Socket({ fd: 3, readable: true, writable: false })
tether.on('error', () => undefined)
tether.once('close', () => {
  signalGroup('SIGTERM')
  setTimeout(() => signalGroup('SIGKILL'), settings.graceMs).unref()
})
tether.resume()
tether.unref()
