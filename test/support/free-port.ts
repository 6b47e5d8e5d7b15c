import { createConnection } from 'node:net'

/** A loopback port nothing listens on right now (scripts/free-port.mjs, which the bench uses too). */
export { freePort } from '../../scripts/free-port.mjs'

/** Whether something accepts TCP connections on 127.0.0.1:port right now. */
export const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
