package chat

// CallIndexes returns how many sessions' tool-call indexes h keeps.
func CallIndexes(h *Harness) int { return h.calls.Len() }
