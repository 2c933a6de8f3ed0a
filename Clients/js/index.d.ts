// Type declarations for the notifbus JavaScript client (src/index.js). Hand-written:
// keep them in step with the JSDoc in src/.

import { EventEmitter } from 'node:events';

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export const PROTOCOL_VERSION: 1;
/** Client-side bound on every wait, in ms (60 s). */
export const DEFAULT_TIMEOUT: number;
/** Code returned for a method call handler that threw something other than a `MethodCallError`: `"error"`. */
export const HANDLER_ERROR_CODE: 'error';

/** An observer's answer; build it only with `NEXT`, `STOP` or `complete()`. */
export interface ChainAnswer {
  readonly op: 'next' | 'stop' | 'complete';
  readonly value: unknown;
}
/** Pass the event on to the next observer. */
export const NEXT: ChainAnswer;
/** End the chain without a value (outcome `stopped`). */
export const STOP: ChainAnswer;
/** End the chain with a value (outcome `completed`); no value is reported as null. */
export function complete(value?: unknown): ChainAnswer;

export interface ObserverEvent {
  name: string;
  /** null when the poster sent none */
  payload: Json;
  /** the broker's event id */
  event: number;
  /** the observer this hop is for */
  observer: string;
}

/** Returns `NEXT`, `STOP` or `complete(value)`; nothing, a throw or a rejection answers `next`. */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler may return nothing, an async one Promise<void>
export type ObserverHandler = (event: ObserverEvent) => ChainAnswer | void | Promise<ChainAnswer | void>;

export type Eviction = { observer: string; by: string } | { handler: string; by: string };

export interface MethodCall {
  method: string;
  /** null when the invoker sent none */
  arguments: Json;
  channel: string;
  /** the invoking client's id */
  from: string;
  /** the broker's call id */
  call: number;
}

/** Returns the result (`undefined` is sent as null) or throws `MethodCallError`. */
export type MethodCallHandler = (call: MethodCall) => unknown;

export type HopReply = 'next' | 'complete' | 'stop' | 'gone' | 'timeout' | 'invalid';

export interface PostResult {
  event: number;
  outcome: 'completed' | 'stopped' | 'unhandled';
  by: string | null;
  value: Json;
  retained: string | null;
  trace: { observer: string; reply: HopReply }[];
  /** present when this is the result of an earlier post with the same `once` key */
  repeat?: true;
}

export interface CallOptions {
  /** ms to wait for the reply instead of the client's default */
  timeout?: number;
}

export interface OnceOptions extends CallOptions {
  /**
   * An idempotency key (§3.8): the request is applied at most once for it. Sent again with
   * the same key and arguments it answers with the first outcome (`repeat: true`); with
   * other arguments it rejects with `once_conflict`. In flight when the connection is lost,
   * it is sent again on the new one (unless `resendKeyed: false`).
   */
  once?: string | null;
}

export interface ConnectOptions {
  /** socket path; else NOTIFBUS_SOCKET, $XDG_RUNTIME_DIR/notifbus.sock, /tmp/notifbus-$UID/notifbus.sock */
  socket?: string;
  /** the name the broker lists this client under */
  name?: string;
  /** default ms for every wait, connecting included (default 60000) */
  timeout?: number;
  /**
   * After a lost connection, connect again and make every observer, handler and the
   * monitor again: by default when the client holds any of them, a waiting `take` or a
   * keyed request in flight; `true` always, `false` never.
   */
  reconnect?: boolean;
  /** Send requests in flight that carry a `once` key again after a reconnect (default true). */
  resendKeyed?: boolean;
}

export interface Reconnected {
  /** each live observer's and handler's first id, mapped to its id on the new connection */
  ids: Record<string, string>;
  /** those whose key or route a newer registration had taken; they also got `onEvicted` */
  superseded: string[];
}

export interface ObserverOptions extends CallOptions {
  /** lower runs first; default 100 */
  priority?: number;
  /** unique across the broker; taking it evicts the holder */
  key?: string | null;
  /** called when this observer is evicted */
  onEvicted?: (eviction: { observer: string; by: string }) => void;
}

export interface HandlerOptions extends CallOptions {
  /** the method; left out or null means the whole channel */
  method?: string | null;
  /** called when another registration displaces this handler */
  onEvicted?: (eviction: { handler: string; by: string }) => void;
}

export interface NotificationAction {
  identifier: string;
  title: string;
  options?: ('foreground' | 'destructive' | 'authenticationRequired')[];
  textInput?: { buttonTitle: string; placeholder?: string | null } | null;
}

export interface NotificationCategory {
  identifier: string;
  actions: NotificationAction[];
  options?: ('customDismissAction' | 'allowInCarPlay' | 'hiddenPreviewsShowTitle' | 'hiddenPreviewsShowSubtitle')[];
  intentIdentifiers?: string[];
}

export interface Status {
  server: string;
  uptimeMs: number;
  /** `queued`: its posts waiting; `unresponsive`: a hop of it timed out and it has sent nothing since. */
  clients: { client: string; name: string | null; pid: number; uid: number; queued: number; unresponsive: boolean }[];
  observers: { observer: string; client: string; events: string[]; priority: number; key: string | null }[];
  handlers: { handler: string; client: string; channel: string; method: string | null }[];
  /** `maxPerClient`: posts one connection may have waiting (`--max-queue-per-client`). */
  queue: { pending: number; current: number | null; maxPerClient: number };
  slots: string[];
  counters: Record<string, number>;
}

export interface HandlerErrorReport {
  error: unknown;
  observer?: string;
  event?: number;
  handler?: string;
  call?: number;
}

export interface ClientEvents {
  evicted: [eviction: Eviction];
  close: [error: ConnectionLostError];
  disconnected: [error: ConnectionLostError];
  reconnected: [info: Reconnected];
  errorFrame: [error: BrokerError];
  handlerError: [report: HandlerErrorReport];
  seen: [frame: { op: 'seen'; dir: 'in' | 'out'; client: string; frame: Record<string, Json> }];
}

export class Client extends EventEmitter<ClientEvents> {
  static connect(options?: ConnectOptions): Promise<Client>;
  /** The id the broker gave this client, such as `"c7"`. */
  readonly id: string | null;
  readonly server: string | null;
  readonly maxFrame: number | null;
  readonly closed: boolean;
  /** Whether the connection is lost and the client is connecting again. */
  readonly reconnecting: boolean;
  /** The present broker id of an observer or handler of this client, given the id it first got. */
  currentId(handle: string): string;
  close(): Promise<void>;
  ping(options?: CallOptions): Promise<void>;
  addObserver(events: string | string[], handler: ObserverHandler, options?: ObserverOptions): Promise<string>;
  removeObserver(observer: string, options?: CallOptions): Promise<string[]>;
  removeObserverByUniqueKey(key: string, options?: CallOptions): Promise<string[]>;
  post(name: string, payload?: unknown, options?: OnceOptions): Promise<PostResult>;
  methodChannel(name: string): MethodChannel;
  put(
    slot: string,
    value: unknown,
    options?: OnceOptions,
  ): Promise<{ replaced: boolean; delivered: boolean; repeat?: true }>;
  take(slot: string, options?: { wait?: number } & OnceOptions): Promise<Json>;
  peek(slot: string, options?: CallOptions): Promise<Json>;
  setNotificationCategories(categories: NotificationCategory[], options?: OnceOptions): Promise<number>;
  notificationCategories(options?: CallOptions): Promise<NotificationCategory[]>;
  status(options?: CallOptions): Promise<Status>;
  monitor(options?: CallOptions): Promise<void>;
  monitor(onSeen: (...seen: ClientEvents['seen']) => void, options?: CallOptions): Promise<void>;
  // The notification profile (src/profile.js).
  addWillPresentObserver(
    handler: (
      notification: Notification,
    ) => PresentationOption[] | null | undefined | Promise<PresentationOption[] | null | undefined>,
    options?: ObserverOptions,
  ): Promise<string>;
  addDidReceiveObserver(
    handler: (
      response: NotificationResponse,
    ) => ChainAnswer | null | undefined | Promise<ChainAnswer | null | undefined>,
    options?: ObserverOptions,
  ): Promise<string>;
  addOpenSettingsObserver(
    handler: (
      notification: Notification | null,
    ) => ChainAnswer | null | undefined | Promise<ChainAnswer | null | undefined>,
    options?: ObserverOptions,
  ): Promise<string>;
  postWillPresent(notification: Notification, options?: OnceOptions): Promise<PostResult>;
  postDidReceive(response: NotificationResponse, options?: OnceOptions): Promise<PostResult>;
  postOpenSettings(notification: Notification | null, options?: OnceOptions): Promise<PostResult>;
  launchNotificationResponse(options?: { wait?: number } & CallOptions): Promise<NotificationResponse | null>;
  /** The app's one call at start: its launch response, then didReceive observed under the key `appId`. */
  receiveNotificationResponses(
    appId: string,
    handler: (
      response: NotificationResponse,
    ) => ChainAnswer | null | undefined | Promise<ChainAnswer | null | undefined>,
    options?: { activatedFor?: string | null; wait?: number; priority?: number } & CallOptions,
  ): Promise<AppStart>;
}

/** What `receiveNotificationResponses` resolves to. */
export interface AppStart {
  /** The click that started the app, taken once from `launch`; null when it started without one. */
  launchResponse: NotificationResponse | null;
  /** The app's didReceive observer (its key is the app id). */
  observer: string;
}

/** `UNNotificationPresentationOptions` by wire name. */
export type PresentationOption = 'badge' | 'sound' | 'list' | 'banner' | 'alert';

/** `UNNotificationContent`, as the protocol carries it. */
export interface NotificationContent {
  title?: string | null;
  subtitle?: string | null;
  body?: string | null;
  categoryIdentifier?: string | null;
  threadIdentifier?: string | null;
  userInfo?: Record<string, Json> | null;
  badge?: number | null;
  sound?: string | null;
}

/** `UNNotification`: its request's identifier, its source and content. */
export interface Notification {
  identifier: string;
  source?: 'remote' | 'local' | null;
  content: NotificationContent;
}

/** `UNNotificationResponse` (and the text-input one). */
export interface NotificationResponse {
  actionIdentifier: string;
  notification: Notification;
  userText?: string | null;
}

export const DEFAULT_ACTION_IDENTIFIER: 'com.apple.UNNotificationDefaultActionIdentifier';
export const DISMISS_ACTION_IDENTIFIER: 'com.apple.UNNotificationDismissActionIdentifier';
export const LAUNCH_SLOT: 'launch';
/** ms `receiveNotificationResponses` waits for the launch response after a D-Bus activation. */
export const ACTIVATION_WAIT: 5000;
export const PRESENTATION_OPTIONS: readonly PresentationOption[];
/** Delegate answer: handled (outcome completed). */
export const HANDLED: ChainAnswer;
/** Delegate answer: pass to the next observer. */
export const PASS: ChainAnswer;
export function presentationOptions(result: PostResult): PresentationOption[] | null;

export class MethodChannel {
  readonly name: string;
  invokeMethod<T = Json>(method: string, args?: unknown, options?: CallOptions): Promise<T>;
  setMethodCallHandler(handler: MethodCallHandler | null, options?: HandlerOptions): Promise<string | null>;
}

export function connect(options?: ConnectOptions): Promise<Client>;

export class NotifBusError extends Error {
  constructor(code: string, message: string, options?: ErrorOptions);
  code: string;
}
export class BrokerError extends NotifBusError {
  constructor(code: string, message: string, details?: unknown);
  /** undefined when the reply had no details, null when it carried null */
  details: unknown;
  /** true when the reply repeats the stored outcome of an earlier request with the same `once` key */
  repeat: boolean;
  static fromWire(error: { code?: unknown; message?: unknown; details?: unknown }): BrokerError;
}
export class MethodCallError extends BrokerError {
  constructor(code: string, message?: string, details?: unknown);
  static fromWire(error: { code?: unknown; message?: unknown; details?: unknown }): MethodCallError;
}
export class MissingPluginError extends MethodCallError {
  constructor(message?: string, details?: unknown);
  code: 'not_implemented';
}
export class ConnectionLostError extends NotifBusError {
  constructor(message: string, options?: ErrorOptions);
  code: 'connection_lost';
}
export class RequestTimeoutError extends NotifBusError {
  constructor(op: string, ms: number);
  code: 'request_timeout';
  op: string;
  timeoutMs: number;
}

export class FrameError extends Error {}
export function encodeFrame(message: object): Buffer;
export function decodeBody(body: Uint8Array): Record<string, unknown>;
export class FrameDecoder {
  readonly bufferedBytes: number;
  push(chunk: Uint8Array): Record<string, unknown>[];
}

export function resolveSocketPath(
  explicit: string | null | undefined,
  env?: Record<string, string | undefined>,
  uid?: number,
): string;
