# Secrets and personal data are removed from tool results: every output
# string matching data.redact.patterns is replaced by its redacted text.
package acs.redact

import rego.v1

redactions contains {"path": sprintf("/outputs/%d/value", [i]), "replacement": redacted} if {
	input.method == "steps/toolCallResult"
	some i, output in input.params.payload.outputs
	is_string(output.value)
	sensitive(output.value)
	redacted := scrub(output.value)
}

sensitive(text) if {
	some pattern in data.redact.patterns
	regex.match(pattern, text)
}

# Every pattern at once, as one alternation of non-capturing groups.
scrub(text) := regex.replace(text, combined, data.redact.replacement)

combined := concat("|", [sprintf("(?:%s)", [pattern]) | some pattern in data.redact.patterns])
