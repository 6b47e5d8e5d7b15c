// A loopback port for a server a test or the bench starts: plain JavaScript, for both.
import { createServer } from 'node:net'

/**
 * A loopback port nothing listens on right now (the OS picks it; the listener is closed again).
 * @returns {Promise<number>}
 */
export const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))))
    })
  })
