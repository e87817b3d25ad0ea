/**
 * Scriptorium memory for OpenClaw: the plugin for its exclusive `memory` slot. No build step: OpenClaw loads
 * this file as it is.
 *
 * - memory_search / memory_get: Scriptorium's own tools (`scriptorium tool`, the MCP server's handlers), over
 *   trusted records only, as the requester whose token setup was given (`--token`), else as the owner;
 * - before_prompt_build: the core and the project's newest records (a SessionStart payload, asked once per
 *   session and process) and the prompt's recall (UserPromptSubmit), appended to the turn's system prompt
 *   (OpenClaw builds it anew each turn and never stores it in the transcript: nothing injected is written back);
 * - agent_end: imports what the agent's database gained and runs an unforced write pass (Stop); in a one-shot
 *   run (`openclaw agent --local`, `openclaw agent exec`: the process ends with its run, and OpenClaw sends
 *   no session_end for it) the forced pass instead (SessionEnd), so the next run recalls it;
 * - before_compaction: the same, forced (PreCompact), before OpenClaw compacts the session: no model-driven
 *   "memory flush" is needed, and this plugin registers none;
 * - session_end: the forced pass (SessionEnd).
 *
 * Every payload names the agent's database (`<agentDir>/openclaw-agent.sqlite`) as the transcript: the
 * importer reads OpenClaw's `transcript_events` rows there. A memory failure never fails the agent: the hook
 * command exits 0 and prints nothing then, and a failed tool call comes back as the tool's answer.
 * `scriptorium setup openclaw` installs it with `scriptorium.json` beside it: this installation's command,
 * the memory's state folder and the two tools' definitions.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { OpenClawPluginApi } from "openclaw/plugin-sdk/plugin-entry";

interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

interface Wiring {
  /** This installation's `scriptorium`, as `scriptorium setup openclaw` found it (its interpreter, by path). */
  command?: string[];
  /** The memory setup made (`--state`). */
  state?: string;
  /** Whom it speaks for when not the owner (`setup openclaw --token`): the tools answer as the token
   * (SCRIPTORIUM_TOKEN), the hooks' sessions are the requester's and their recall shows its records and the
   * shared ones (SCRIPTORIUM_HOOK_AUDIENCE). */
  requester?: { name: string; token: string };
  /** memory_search and memory_get as Scriptorium defines them. */
  tools?: ToolDefinition[];
}

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
  Stop: 25_000,
  PreCompact: 25_000,
  SessionEnd: 5_000,
  tool: 30_000,
};

const ROOT_VALUE_FLAGS = new Set(["--profile", "--log-level", "--container"]);

/** Whether this process is a one-shot run of the CLI, `openclaw agent --local …` or `openclaw agent exec …`
 * (its command line after OpenClaw's root options): the run ends the process, and OpenClaw sends no
 * session_end for it. The gateway's sessions and the TUI's keep the unforced pass: their session_end, or the
 * watcher once they are idle, writes the rest. */
function oneShot(argv: string[]): boolean {
  const args = argv.slice(2);
  let at = 0;
  while (at < args.length && args[at].startsWith("-") && args[at] !== "--") {
    at += ROOT_VALUE_FLAGS.has(args[at]) ? 2 : 1;
  }
  if (args[at] !== "agent") {
    return false;
  }
  const rest = args.slice(at + 1);
  const end = rest.indexOf("--");
  return rest[0] === "exec" || (end < 0 ? rest : rest.slice(0, end)).includes("--local");
}

const ONE_SHOT = oneShot(process.argv);

interface Done {
  status: number | null;
  stdout: string;
}

/** `scriptorium ARGS`, `input` on its stdin; never rejects (a failure is a null status). */
function run(args: string[], input: string, timeoutMs: number): Promise<Done> {
  return new Promise((resolve) => {
    const [program, ...prefix] = COMMAND;
    const who = WIRING.requester;
    const env = who ? { ...process.env, SCRIPTORIUM_TOKEN: who.token, SCRIPTORIUM_HOOK_AUDIENCE: who.name } : process.env;
    const child = spawn(program, [...prefix, ...args], { env, stdio: ["pipe", "pipe", "ignore"] });
    let stdout = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => (stdout += chunk));
    child.on("error", () => {
      clearTimeout(timer);
      resolve({ status: null, stdout: "" });
    });
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout });
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
  });
}

interface Where {
  agentId?: string;
  sessionId?: string;
  workspaceDir?: string;
}

interface HookAnswer {
  hookSpecificOutput?: { additionalContext?: string };
}

export default {
  id: "scriptorium",
  name: "Scriptorium memory",
  description: "Long-term memory kept by Scriptorium",
  kind: "memory" as const,
  register(api: OpenClawPluginApi): void {
    /** The agent's database: where OpenClaw keeps this session's transcript. */
    function database(where: Where): string {
      const agent = where.agentId ?? "main";
      try {
        return join(api.runtime.agent.resolveAgentDir(api.config, agent), "openclaw-agent.sqlite");
      } catch {
        const state = process.env.OPENCLAW_STATE_DIR ?? join(homedir(), ".openclaw");
        return join(state, "agents", agent, "agent", "openclaw-agent.sqlite");
      }
    }

    /** `scriptorium hook` for one event of the session `where` is in: the context it adds ("" when none). */
    async function hook(event: string, where: Where, fields: Record<string, unknown> = {}): Promise<string> {
      if (!where.sessionId) {
        return "";
      }
      const payload = {
        hook_event_name: event,
        session_id: where.sessionId,
        transcript_path: database(where),
        cwd: where.workspaceDir ?? process.cwd(),
        ...fields,
      };
      const done = await run(["hook", ...STATE], JSON.stringify(payload), TIMEOUT_MS[event] ?? 10_000);
      if (done.status !== 0 || !done.stdout.trim()) {
        return "";
      }
      try {
        return (JSON.parse(done.stdout) as HookAnswer).hookSpecificOutput?.additionalContext ?? "";
      } catch {
        return "";
      }
    }

    for (const definition of WIRING.tools ?? []) {
      api.registerTool({
        name: definition.name,
        label: definition.name,
        description: definition.description,
        parameters: definition.parameters as never,
        async execute(_id: string, params: unknown) {
          const done = await run(["tool", definition.name, ...STATE], JSON.stringify(params ?? {}), TIMEOUT_MS.tool);
          const text = done.stdout.trim() || JSON.stringify({ ok: false, reason: "UNAVAILABLE", retryable: true });
          let details: unknown = {};
          try {
            details = JSON.parse(text);
          } catch {
            details = { ok: false, reason: "UNAVAILABLE", retryable: true };
          }
          return { content: [{ type: "text" as const, text }], details };
        },
      });
    }

    api.registerMemoryCapability({
      deterministicRecallToolName: "memory_search",
      promptBuilder: ({ availableTools }) =>
        availableTools.has("memory_search")
          ? [
              "## Memory",
              "Long-term memory of earlier conversations is kept by Scriptorium. Search it with memory_search " +
                "(a few words) before answering about past work, people, decisions or preferences; read a " +
                "record whole with memory_get (its memory_id).",
            ]
          : [],
    });

    const openings = new Map<string, string>();

    api.on("before_prompt_build", async (event, ctx) => {
      const key = ctx.sessionId ?? "";
      if (!openings.has(key)) {
        openings.set(key, await hook("SessionStart", ctx, { source: "startup" }));
      }
      const prompt = event.currentUserMessage ?? event.prompt;
      const recall = prompt ? await hook("UserPromptSubmit", ctx, { prompt }) : "";
      const added = [openings.get(key) ?? "", recall].filter((text) => text.length > 0).join("\n\n");
      return added ? { appendSystemContext: added } : undefined;
    });

    api.on("agent_end", async (_event, ctx) => {
      await hook(ONE_SHOT ? "SessionEnd" : "Stop", ctx);
    });

    api.on("before_compaction", async (_event, ctx) => {
      await hook("PreCompact", ctx);
    });

    api.on("after_compaction", async (_event, ctx) => {
      openings.delete(ctx.sessionId ?? "");
    });

    api.on("session_end", async (event, ctx) => {
      await hook("SessionEnd", { ...ctx, sessionId: event.sessionId });
    });
  },
};
