package main

import "strings"

// description colours a finished description: the pod's Status, each
// container's current State and its Reason, and the type of warning
// events. It works on the aligned text, after tabwriter and after the
// describe writer defused every escape sequence of the content, so the
// colours change neither the layout nor what may reach the terminal; each
// coloured value is the last cell of its line or the first of an aligned
// row, where sequences cannot shift a column.
func (p palette) description(text string) string {
	if !p.on {
		return text
	}
	lines := strings.Split(text, "\n")
	inEvents, afterState := false, false
	for i, line := range lines {
		switch {
		case line == "Events:":
			inEvents = true
		case inEvents && strings.HasPrefix(line, "  "):
			if rest, ok := strings.CutPrefix(line, "  "+eventWarning); ok && strings.HasPrefix(rest, " ") {
				lines[i] = "  " + p.paint(toneWarn, eventWarning) + rest
			}
		case strings.HasPrefix(line, "Status:"):
			lines[i] = paintValue(p, line, func(v string) tone {
				word, _, _ := strings.Cut(v, " ") // "Terminating (lasts 20s)"
				return statusTone(word)
			})
		case strings.HasPrefix(line, "    State:"):
			lines[i] = paintValue(p, line, statusTone)
		case afterState && strings.HasPrefix(line, "      Reason:"):
			lines[i] = paintValue(p, line, statusTone)
		}
		if inEvents && !strings.HasPrefix(line, "  ") && line != "Events:" {
			inEvents = false
		}
		// A Reason belongs to the current state only up to the next line
		// of the container at State's level or above.
		afterState = strings.HasPrefix(line, "    State:") ||
			(afterState && strings.HasPrefix(line, "      "))
	}
	return strings.Join(lines, "\n")
}

const eventWarning = "Warning"

// paintValue colours the value of a "Title:  value" line by toneOf.
func paintValue(p palette, line string, toneOf func(string) tone) string {
	title, value, ok := strings.Cut(line, ":")
	if !ok {
		return line
	}
	trimmed := strings.TrimLeft(value, " ")
	if trimmed == "" {
		return line
	}
	pad := value[:len(value)-len(trimmed)]
	return title + ":" + pad + p.paint(toneOf(trimmed), trimmed)
}
