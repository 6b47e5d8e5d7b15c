import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer, connect, type Server, type Socket } from 'node:net'

/**
 * Simulated hosts for multi-host tests: each gets a network namespace of its own (`ip netns`),
 * joined to this machine by a veth pair, so its processes have their own loopback and reach the
 * shared services (NATS, PostgreSQL, the mock LLM) only through the veth, as another machine
 * would through its network. Nothing leaves this machine: the addresses are private to the veth
 * pairs, and the host forwards nothing (ip_forward stays as it is).
 *
 * Needs root and a working `ip netns`; elsewhere every "host" is a plain process on this
 * machine's loopback (`isolated` says which). The hostname is shared either way (no UTS
 * namespace): lease owners still name this host, so a dead worker's lease is taken over at once
 * instead of after its expiry.
 */
export interface Hosts {
  /** Whether each host runs in a network namespace of its own. */
  readonly isolated: boolean
  /** The address every host reaches the shared services at (the test process listens on it too). */
  readonly address: string
  /** The command line that runs `argv` on host `index`. */
  readonly command: (index: number, argv: ReadonlyArray<string>) => [string, string[]]
  /** A port on `address` relayed to `port` on this machine's 127.0.0.1 (the same port when not isolated). */
  readonly expose: (port: number) => Promise<number>
  /** Removes the namespaces, links and relays. */
  readonly close: () => Promise<void>
}

const ip = (...args: string[]): void => {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })
}

const loopback = (): Hosts => ({
  isolated: false,
  address: '127.0.0.1',
  command: (_, argv) => [argv[0]!, argv.slice(1)],
  expose: async (port) => port,
  close: async () => undefined
})

/** Whether this process may create network namespaces and veth pairs. */
const canIsolate = (): boolean => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false
  const probe = `avprobe${randomBytes(3).toString('hex')}`
  try {
    ip('netns', 'add', probe)
    ip('netns', 'del', probe)
    return true
  } catch {
    return false
  }
}

/** `count` hosts: network namespaces when this machine allows, else loopback processes. */
export const makeHosts = async (count: number): Promise<Hosts> => {
  if (!canIsolate()) return loopback()
  const tag = randomBytes(2).toString('hex')
  // A /30 per host in one /24 chosen at random, so parallel test runs rarely meet; a clash fails loudly.
  const net = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]!}`
  const namespaces: string[] = []
  const links: string[] = []
  const servers: Server[] = []
  const sockets = new Set<Socket>()
  const close = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy()
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
    for (const link of links) {
      try {
        ip('link', 'del', link)
      } catch {
        // went with its namespace
      }
    }
    for (const namespace of namespaces) {
      try {
        ip('netns', 'del', namespace)
      } catch {
        // already gone
      }
    }
  }
  try {
    for (let i = 0; i < count; i++) {
      const namespace = `av${process.pid}h${i}x${tag}`
      const outside = `avh${tag}${i}`
      const inside = `avn${tag}${i}`
      const hostAddress = `${net}.${4 * i + 1}`
      ip('netns', 'add', namespace)
      namespaces.push(namespace)
      ip('link', 'add', outside, 'type', 'veth', 'peer', 'name', inside)
      links.push(outside)
      ip('link', 'set', inside, 'netns', namespace)
      ip('addr', 'add', `${hostAddress}/30`, 'dev', outside)
      ip('link', 'set', outside, 'up')
      ip('-n', namespace, 'addr', 'add', `${net}.${4 * i + 2}/30`, 'dev', inside)
      ip('-n', namespace, 'link', 'set', inside, 'up')
      ip('-n', namespace, 'link', 'set', 'lo', 'up')
      // Every host reaches this machine's addresses (the services' one included) through its veth.
      ip('-n', namespace, 'route', 'add', 'default', 'via', hostAddress)
    }
  } catch (error) {
    await close()
    throw error
  }
  const address = `${net}.1`
  return {
    isolated: true,
    address,
    // `ip netns exec` execs the command itself: the child's pid is the command's.
    command: (index, argv) => ['ip', ['netns', 'exec', namespaces[index]!, ...argv]],
    expose: (port) =>
      new Promise((resolve, reject) => {
        const server = createServer((incoming) => {
          const outgoing = connect({ host: '127.0.0.1', port })
          for (const socket of [incoming, outgoing]) {
            sockets.add(socket)
            socket.once('close', () => sockets.delete(socket))
            // A host that dies resets its connections: pass the end on, never crash the test.
            socket.on('error', () => undefined)
          }
          incoming.once('close', () => outgoing.destroy())
          outgoing.once('close', () => incoming.destroy())
          incoming.pipe(outgoing)
          outgoing.pipe(incoming)
        })
        servers.push(server)
        server.once('error', reject)
        server.listen(0, address, () => {
          const bound = server.address()
          if (typeof bound === 'object' && bound !== null) resolve(bound.port)
          else reject(new Error('relay has no port'))
        })
      }),
    close
  }
}
