// The adversary of the confinement race tests, run as its own process so it races the tools for
// real: it flips `<ws>/link` in a synchronous loop until it has made `maxSwaps` swaps or `maxMs`
// have passed (the parent kills it sooner). Modes:
//   folder  `link` is a real folder inside (parked as `.parked` meanwhile) or a symlink to the
//           folder `<outside>`. A folder cannot be renamed over a symlink (nor the reverse), so
//           each swap moves one away first; a folder a write created at `link` in that gap is
//           moved aside to `.intruder-N` (still inside the workspace).
//   file    `link` is a regular file inside (text `<text>`) or a symlink to the file `<outside>`,
//           each put in place with one atomic rename.
// `dwellUs` (default 0) holds each state that long, so that a call fast enough to fit in one
// state is as likely as one that straddles a swap.
// Prints `{"ready":true}` after the first full cycle; on an unexpected error prints it and exits 1.
import { renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs'
import * as path from 'node:path'

const [mode, ws, outside, maxSwapsText, maxMsText, text = '', dwellUsText = '0'] = process.argv.slice(2)
const dwellNs = BigInt(Math.round(Number(dwellUsText) * 1000))
const maxSwaps = Number(maxSwapsText)
const deadline = Date.now() + Number(maxMsText)
const link = path.join(ws, 'link')
const parked = path.join(ws, '.parked')
const fresh = path.join(ws, '.fresh-link')
let intruders = 0

/** Renames `from` to `link`, moving aside whatever a concurrent write created there meanwhile. */
const takeLink = (from) => {
  for (let attempt = 0; ; attempt += 1) {
    try {
      renameSync(from, link)
      return
    } catch (error) {
      if (attempt > 1000) throw error
      try {
        renameSync(link, path.join(ws, `.intruder-${intruders++}`))
      } catch {}
    }
  }
}

const swaps = {
  folder: [
    () => {
      renameSync(link, parked)
      symlinkSync(outside, fresh)
      takeLink(fresh)
    },
    () => {
      unlinkSync(link)
      takeLink(parked)
    }
  ],
  file: [
    () => {
      symlinkSync(outside, fresh)
      renameSync(fresh, link)
    },
    () => {
      writeFileSync(fresh, text)
      renameSync(fresh, link)
    }
  ]
}[mode]

const dwell = () => {
  if (dwellNs === 0n) return
  const until = process.hrtime.bigint() + dwellNs
  while (process.hrtime.bigint() < until) {}
}

try {
  const [toOutside, toInside] = swaps
  let count = 0
  toOutside()
  toInside()
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`)
  while (count < maxSwaps && Date.now() < deadline) {
    toOutside()
    dwell()
    toInside()
    dwell()
    count += 2
  }
  process.stdout.write(`${JSON.stringify({ done: count })}\n`)
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: String(error?.message ?? error) })}\n`)
  process.exit(1)
}
