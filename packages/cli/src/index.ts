export { main } from './main.js'
export * from './mock-llm/index.js'
