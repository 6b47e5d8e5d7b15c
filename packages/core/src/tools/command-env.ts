/**
 * Variable names that look like credentials. Commands run by or for the model print into tool
 * results and verification feedback, which are stored in the trace; API keys must never reach
 * the trace (CONTRACT.md §1), so they are not handed to those commands in the first place.
 */
const SECRET_NAME = /(API_?KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_?KEY)/i

/**
 * The environment for commands the model can influence (`exec`, `command` verification): the
 * host's environment minus variables whose names look like credentials.
 *
 * @example
 * commandEnv({ PATH: '/bin', OPENAI_API_KEY: 'sk-...' }) // { PATH: '/bin' }
 */
export const commandEnv = (base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(base).filter(([name]) => !SECRET_NAME.test(name)))
