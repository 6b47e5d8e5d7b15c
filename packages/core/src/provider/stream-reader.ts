import type { SecretSet } from '../secrets/secret-set.js'
import { providerErrorFromStreamCut } from './http-error.js'

/** How one adapter reassembles its SDK's stream events. */
export interface StreamAssembler<E> {
  readonly add: (event: E) => void
  /** The text received so far (kept as the attempt's partial output when the stream is cut). */
  readonly partialText: () => string
  /** Whether the stream ended with its proper end marker (a finish reason, `message_stop`). */
  readonly complete: () => boolean
}

/**
 * Reads a provider's stream to its end, measuring time to first token. A stream that fails
 * midway or ends without its end marker (the SDKs end an aborted stream quietly) is a cut:
 * transient, possibly delivered, partial text kept. Returns the time to first token in ms.
 */
export const readStream = async <E>(
  stream: AsyncIterable<E>,
  assembler: StreamAssembler<E>,
  provider: { readonly name: string; readonly secrets?: SecretSet | undefined },
  startedAt: number
): Promise<number | undefined> => {
  let timeToFirstTokenMs: number | undefined
  try {
    for await (const event of stream) {
      timeToFirstTokenMs ??= Math.round(performance.now() - startedAt)
      assembler.add(event)
    }
  } catch (error) {
    throw providerErrorFromStreamCut(provider.name, error, assembler.partialText(), provider.secrets)
  }
  if (!assembler.complete()) throw providerErrorFromStreamCut(provider.name, undefined, assembler.partialText(), provider.secrets)
  return timeToFirstTokenMs
}
