package agent

// CallIndexes returns how many sessions' tool-call indexes a keeps.
func CallIndexes(a *Agent) int { return a.calls.Len() }
