import { createServer } from 'node:net'
import { onTestFinished } from 'vitest'

export { accepts } from './free-port.js'

/** A TCP server on 127.0.0.1 that counts the connections it accepts; closed when the test ends. */
export const countingServer = async (): Promise<{ port: number; accepted: () => number }> => {
  let accepted = 0
  const server = createServer((socket) => {
    accepted += 1
    socket.end()
  })
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { port: address.port, accepted: () => accepted }
}

/** A shell command that connects to 127.0.0.1:port and exits 0 on success, printing `connected` or the error code. */
export const connectCommand = (port: number): string =>
  `${process.execPath} -e "require('net').connect(${port}, '127.0.0.1').on('connect', () => { console.log('connected'); process.exit(0) }).on('error', (e) => { console.log(e.code); process.exit(1) })"`
