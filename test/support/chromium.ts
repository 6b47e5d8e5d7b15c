import { existsSync } from 'node:fs'
import { type Browser, chromium } from 'playwright-core'

/** Debian's chromium, driven by playwright-core (no browser download). */
export const CHROMIUM_PATH = '/usr/bin/chromium'

/**
 * Launches headless Chromium with nothing that talks to the network on its own, so the only
 * traffic is the page's to the inspector on 127.0.0.1.
 */
export const launchChromium = async (): Promise<Browser> => {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`${CHROMIUM_PATH} is missing: install it with apt-get install -y chromium`)
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync'
    ]
  })
}
