# Builders for test inputs, shared by the *_test.rego files.
package acs_test

import rego.v1

# A steps/toolCallRequest hook from `user` with `roles` in `environment`,
# calling `tool` with `args` (plain values), the server having annotated
# the tool with `annotations`.
call(tool, args, roles, environment, annotations) := {
	"method": "steps/toolCallRequest",
	"params": {
		"metadata": {
			"agent_id": "test-agent",
			"environment": environment,
			"user_context": {"user_id": "alice", "roles": roles},
		},
		"payload": {
			"tool": {"name": tool},
			"arguments": {name: {"value": value} | some name, value in args},
		},
	},
	"context": {"route": "test", "transport": "stdio", "tool": {"name": tool, "annotations": annotations}},
}

# A read-only tool called in development.
dev_call(tool, args, roles) := call(tool, args, roles, "development", {"readOnlyHint": true})

# A steps/toolCallResult hook whose outputs are `texts`.
result(tool, texts) := {
	"method": "steps/toolCallResult",
	"params": {
		"metadata": {"agent_id": "test-agent"},
		"payload": {
			"tool": {"name": tool},
			"exit_status": "success",
			"outputs": [{"value": text} | some text in texts],
		},
	},
	"context": {},
}
