// The tests run against a real nats-server; this makes sure one is installed (installing it
// with apt-get where that is possible) and fails loudly otherwise: NATS tests never skip.
import { execFileSync, spawnSync } from 'node:child_process'

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0

if (!has('nats-server')) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (isRoot && has('apt-get')) {
    process.stderr.write('nats-server is missing: installing it with apt-get\n')
    execFileSync('apt-get', ['update'], { stdio: 'inherit' })
    execFileSync('apt-get', ['install', '-y', 'nats-server'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
  } else {
    process.stderr.write('The tests need nats-server on the PATH: install it (Debian/Ubuntu: sudo apt-get install nats-server).\n')
    process.exit(1)
  }
}
