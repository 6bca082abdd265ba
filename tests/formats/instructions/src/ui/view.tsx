export function View() { return null }
