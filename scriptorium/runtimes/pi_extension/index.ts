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
 * - session_shutdown: the forced pass (SessionEnd).
 *
 * Every payload names pi's session file as the transcript, so the importer reads pi's format, forks and
 * tree included. A memory failure never fails the agent: the hook command exits 0 and prints nothing then.
 * `scriptorium setup pi` installs it with `scriptorium.json` beside it: this installation's command and the
 * memory's state folder. Installed another way, it runs `scriptorium` (or SCRIPTORIUM_COMMAND) from PATH on
 * the per-user memory.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";

interface Wiring {
  /** This installation's `scriptorium`, as `scriptorium setup pi` found it (its interpreter, by path). */
  command?: string[];
  /** The memory setup made (`--state`). */
  state?: string;
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
const TIMEOUT_MS: Record<string, number> = {
  SessionStart: 10_000,
  UserPromptSubmit: 5_000,
  Stop: 60_000,
  PreCompact: 60_000,
  SessionEnd: 5_000,
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

export default function scriptorium(pi: ExtensionAPI): void {
  let opening = "";

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
