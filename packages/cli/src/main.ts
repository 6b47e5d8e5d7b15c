export async function main(_argv: string[]): Promise<number> { return 0 }
