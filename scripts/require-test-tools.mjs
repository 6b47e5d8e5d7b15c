// The tests use real components: a nats-server, a PostgreSQL server (started by the tests
// themselves from Debian's binaries), Debian's chromium for the inspector's end-to-end test, and
// bubblewrap (`bwrap`) for the sandboxed exec tests.
// This makes sure all are installed (with apt-get where that is possible, as root) and fails
// loudly otherwise: those tests never skip.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0
// Debian's postgresql package keeps initdb and postgres in /usr/lib/postgresql/<version>/bin, off PATH.
const hasPostgres = () =>
  (has('initdb') && has('postgres')) ||
  (existsSync('/usr/lib/postgresql') && readdirSync('/usr/lib/postgresql').some((version) => existsSync(`/usr/lib/postgresql/${version}/bin/initdb`)))
const missing = [
  ...(has('nats-server') ? [] : ['nats-server']),
  ...(hasPostgres() ? [] : ['postgresql']),
  ...(existsSync('/usr/bin/chromium') ? [] : ['chromium']),
  ...(has('bwrap') ? [] : ['bubblewrap'])
]

if (missing.length > 0) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (isRoot && has('apt-get')) {
    process.stderr.write(`${missing.join(' and ')} missing: installing with apt-get\n`)
    execFileSync('apt-get', ['update'], { stdio: 'inherit' })
    execFileSync('apt-get', ['install', '-y', ...missing], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
  } else {
    process.stderr.write(`The tests need ${missing.join(' and ')} (Debian/Ubuntu: sudo apt-get install ${missing.join(' ')}).\n`)
    process.exit(1)
  }
}
