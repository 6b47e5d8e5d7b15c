// The tests use real components: a nats-server, and Debian's chromium for the inspector's
// end-to-end test. This makes sure both are installed (with apt-get where that is possible,
// as root) and fails loudly otherwise: those tests never skip.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0
const missing = [...(has('nats-server') ? [] : ['nats-server']), ...(existsSync('/usr/bin/chromium') ? [] : ['chromium'])]

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
