# Facts about the hook that every concern uses.
package acs.common

import rego.v1

tool_call if input.method == "steps/toolCallRequest"

tool_name := input.params.payload.tool.name

user_id := object.get(input.params.metadata, ["user_context", "user_id"], "anonymous")

roles := object.get(input.params.metadata, ["user_context", "roles"], [])

environment := object.get(input.params.metadata, "environment", "development")

# Tool arguments by name (steps/toolCallRequest wraps each as {"value": ...}).
arguments[name] := argument.value if {
	some name, argument in input.params.payload.arguments
}

# The server's definition of the tool (input.context.tool, from tools/list).
annotation(name) := object.get(input.context, ["tool", "annotations", name], false)

# Whether the tool name matches any of the glob patterns.
matches_any(patterns) if {
	some pattern in patterns
	glob.match(pattern, [], tool_name)
}
