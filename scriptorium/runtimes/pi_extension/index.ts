/**
 * Scriptorium memory for pi: the same hook entry as Claude Code's and Codex's (`scriptorium hook`), fed
 * pi's own events. No build step: pi loads this file as it is.
 *
 * - session_start: the core and the project's newest records (a SessionStart payload), kept for every turn
 *   (pi builds each turn's system prompt anew; after a compaction they are read again);
 * - before_agent_start: the prompt's recall (UserPromptSubmit); the core and the recall go into the
 *   turn's system prompt;
 * - agent_end: imports what pi's session file gained and runs an unforced write pass (Stop);
 * - session_before_compact: the same, forced (PreCompact);
 * - session_shutdown: the forced pass (SessionEnd);
 * - the memory tools (memory_search, memory_get, memory_status, memory_update) as pi tools of its own,
 *   answered by `scriptorium tool` (the MCP server's handlers; pi has no MCP client of its own).
 *
 * Every payload names pi's session file as the transcript, so the importer reads pi's format, forks and
 * tree included. A memory failure never fails the agent: the hook command exits 0 and prints nothing then.
 * `scriptorium setup pi` installs it with `scriptorium.json` beside it: this installation's command, the
 * memory's state folder and the tools' definitions. Installed another way, it runs `scriptorium` (or
 * SCRIPTORIUM_COMMAND) from PATH on the per-user memory, without the tools.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";

interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

interface Wiring {
  /** This installation's `scriptorium`, as `scriptorium setup pi` found it (its interpreter, by path). */
  command?: string[];
  /** The memory setup made (`--state`). */
  state?: string;
  /** The memory tools as Scriptorium defines them (JSON Schema parameters, which TypeBox schemas are). */
  tools?: ToolDefinition[];
  /** Whom it speaks for when not the owner (`setup pi --token`): SCRIPTORIUM_TOKEN for the tools,
   * SCRIPTORIUM_HOOK_AUDIENCE for the hooks. */
  requester?: { name: string; token: string };
}

/** What `scriptorium setup pi` wrote beside this file ({} when the extension was installed another way). */
function wiring(): Wiring {
  try {
    const here = dirname(fileURLToPath(import.meta.url));
    return JSON.parse(readFileSync(join(here, "scriptorium.json"), "utf8")) as Wiring;
  } catch {
    return {};
  }
}

const WIRING = wiring();
const COMMAND = WIRING.command ?? [process.env.SCRIPTORIUM_COMMAND ?? "scriptorium"];
const STATE = WIRING.state ? ["--state", WIRING.state] : [];
const ENV = WIRING.requester
  ? { ...process.env, SCRIPTORIUM_TOKEN: WIRING.requester.token, SCRIPTORIUM_HOOK_AUDIENCE: WIRING.requester.name }
  : process.env;
const TIMEOUT_MS: Record<string, number> = {
  SessionStart: 10_000,
  UserPromptSubmit: 5_000,
  Stop: 60_000,
  PreCompact: 60_000,
  SessionEnd: 5_000,
  tool: 30_000,
};

interface HookAnswer {
  hookSpecificOutput?: { additionalContext?: string };
}

/** `scriptorium hook` for one event of the session `ctx` is in: the context it adds ("" when none). */
function hook(event: string, ctx: ExtensionContext, fields: Record<string, unknown> = {}): string {
  const payload = {
    hook_event_name: event,
    session_id: ctx.sessionManager.getSessionId(),
    transcript_path: ctx.sessionManager.getSessionFile() ?? "",
    cwd: ctx.cwd,
    ...fields,
  };
  const [program, ...prefix] = COMMAND;
  const done = spawnSync(program, [...prefix, "hook", ...STATE], {
    env: ENV,
    input: JSON.stringify(payload),
    encoding: "utf8",
    timeout: TIMEOUT_MS[event] ?? 10_000,
  });
  if (done.error !== undefined || done.status !== 0 || !done.stdout.trim()) {
    return "";
  }
  try {
    const answer = JSON.parse(done.stdout) as HookAnswer;
    return answer.hookSpecificOutput?.additionalContext ?? "";
  } catch {
    return "";
  }
}

/** `scriptorium tool NAME` with the model's arguments: the tool's JSON answer, ok or not. */
function tool(name: string, params: unknown): { text: string; details: unknown } {
  const [program, ...prefix] = COMMAND;
  const done = spawnSync(program, [...prefix, "tool", name, ...STATE], {
    env: ENV,
    input: JSON.stringify(params ?? {}),
    encoding: "utf8",
    timeout: TIMEOUT_MS.tool,
  });
  const text = done.error === undefined ? done.stdout.trim() : "";
  try {
    return { text, details: JSON.parse(text) };
  } catch {
    const unavailable = { ok: false, reason: "UNAVAILABLE", retryable: true, message: "memory did not answer" };
    return { text: JSON.stringify(unavailable), details: unavailable };
  }
}

export default function scriptorium(pi: ExtensionAPI): void {
  let opening = "";

  for (const definition of WIRING.tools ?? []) {
    pi.registerTool({
      name: definition.name,
      label: definition.name,
      description: definition.description,
      parameters: definition.parameters as never,
      async execute(_id, params) {
        const { text, details } = tool(definition.name, params);
        return { content: [{ type: "text", text }], details };
      },
    });
  }

  pi.on("session_start", async (_event, ctx) => {
    // pi builds each turn's system prompt anew, a resumed session's too: the core goes into every one
    opening = hook("SessionStart", ctx, { source: "startup" });
  });

  pi.on("before_agent_start", async (event, ctx) => {
    const recall = hook("UserPromptSubmit", ctx, { prompt: event.prompt });
    const added = [opening, recall].filter((text) => text.length > 0).join("\n\n");
    return added ? { systemPrompt: `${event.systemPrompt}\n\n${added}` } : undefined;
  });

  pi.on("agent_end", async (_event, ctx) => {
    hook("Stop", ctx);
  });

  pi.on("session_before_compact", async (_event, ctx) => {
    hook("PreCompact", ctx);
    opening = hook("SessionStart", ctx, { source: "compact" });
  });

  pi.on("session_shutdown", async (_event, ctx) => {
    hook("SessionEnd", ctx);
  });
}
