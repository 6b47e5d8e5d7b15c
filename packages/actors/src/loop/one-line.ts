/**
 * A text as one line for a log or a run's error message: its lines folded into one, so that no
 * part of a reason spelled over several lines (a contract's, a driver's) is lost, and at most
 * `max` characters, cut with `...`.
 */
export const oneLine = (text: string, max = 300): string => {
  const folded = text.replace(/\s*\n\s*/g, ' ').trim()
  return folded.length > max ? `${folded.slice(0, max - 3)}...` : folded
}
