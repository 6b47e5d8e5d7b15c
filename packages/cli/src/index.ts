export { main } from './main.js'
export * from './mock-llm/index.js'
export { EXIT_WITH_PARENT_ENV, exitWithParent, spawnTethered, type TetheredSpawnOptions } from './process/tether.js'
