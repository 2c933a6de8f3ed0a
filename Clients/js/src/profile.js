// The notification profile on the JavaScript client, as the Swift client has it: typed
// observers for the three delegate methods, typed posts and the launch payload. Payloads
// stay the protocol's JSON objects; the broker checks them and decides, this only adapts.
//
//   UNUserNotificationCenterDelegate method     event         observer / post
//   userNotificationCenter(_:willPresent:...)   willPresent   addWillPresentObserver / postWillPresent
//   userNotificationCenter(_:didReceive:...)    didReceive    addDidReceiveObserver / postDidReceive
//   userNotificationCenter(_:openSettingsFor:)  openSettings  addOpenSettingsObserver / postOpenSettings
import { Client, complete, NEXT, STOP } from './client.js';

/** `UNNotificationDefaultActionIdentifier`: the user tapped the notification itself. */
export const DEFAULT_ACTION_IDENTIFIER = 'com.apple.UNNotificationDefaultActionIdentifier';
/** `UNNotificationDismissActionIdentifier`: the user dismissed it. */
export const DISMISS_ACTION_IDENTIFIER = 'com.apple.UNNotificationDismissActionIdentifier';
/** The slot where the broker keeps an unhandled click that would launch the app. */
export const LAUNCH_SLOT = 'launch';
/**
 * How long `receiveNotificationResponses` waits (ms) for the launch response of an app
 * started by D-Bus activation: the desktop bridge puts it in `launch` before it activates
 * the app, so it is there; the wait covers a broker that is slow.
 */
export const ACTIVATION_WAIT = 5000;
/** `UNNotificationPresentationOptions`, by their wire names. */
export const PRESENTATION_OPTIONS = Object.freeze(['badge', 'sound', 'list', 'banner', 'alert']);
/** A delegate observer's answer: handled, the chain ends `completed`. */
export const HANDLED = complete(null);
/** A delegate observer's answer: not mine, the next observer gets it. */
export const PASS = NEXT;

/**
 * The options a `willPresent` post completed with, in the observer's order, or null when
 * no observer decided to present (stopped, unhandled).
 * @param {{outcome: string, value: unknown}} result
 * @returns {string[] | null}
 */
export function presentationOptions(result) {
  return result.outcome === 'completed' && Array.isArray(result.value) ? result.value.map(String) : null;
}

function optionsAnswer(options) {
  if (options == null) return NEXT;
  if (!Array.isArray(options))
    throw new TypeError(`a willPresent observer returns an array of options or null, not ${options}`);
  for (const name of options) {
    if (!PRESENTATION_OPTIONS.includes(name)) {
      throw new TypeError(
        `unknown presentation option ${JSON.stringify(name)}; expected ${PRESENTATION_OPTIONS.join(', ')}`,
      );
    }
  }
  if (new Set(options).size !== options.length)
    throw new TypeError(`repeated presentation option in ${JSON.stringify(options)}`);
  return complete(options);
}

function delegateAnswer(reply) {
  if (reply == null) return NEXT;
  if (reply === NEXT || reply === STOP || reply?.constructor === HANDLED.constructor) return reply;
  throw new TypeError('a delegate observer returns HANDLED, PASS, STOP or complete(value)');
}

/** Wraps a typed handler: reads the payload (next when it does not read), converts the answer. */
function typed(read, answer, handler) {
  return async ({ payload }) => {
    const value = read(payload);
    if (value === undefined) return NEXT;
    return answer(await handler(value));
  };
}

const readNotification = (payload) => {
  const n = payload?.notification;
  return n && typeof n.identifier === 'string' ? n : undefined;
};
const readResponse = (payload) =>
  payload && typeof payload.actionIdentifier === 'string' && typeof payload.notification?.identifier === 'string'
    ? payload
    : undefined;
const readSettingsTarget = (payload) => {
  const n = payload?.notification;
  if (n == null) return null;
  return typeof n.identifier === 'string' ? n : undefined;
};

const profile = {
  /**
   * Observes `willPresent`: `handler(notification)` returns the presentation options
   * (`['banner', 'sound']`; `[]` means do not present) or null to pass it on.
   */
  addWillPresentObserver(handler, options = {}) {
    return this.addObserver('willPresent', typed(readNotification, optionsAnswer, handler), options);
  },
  /** Observes `didReceive`: `handler(response)` returns HANDLED (or complete(value)), PASS or STOP. */
  addDidReceiveObserver(handler, options = {}) {
    return this.addObserver('didReceive', typed(readResponse, delegateAnswer, handler), options);
  },
  /** Observes `openSettings`: `handler(notificationOrNull)` returns HANDLED, PASS or STOP. */
  addOpenSettingsObserver(handler, options = {}) {
    return this.addObserver('openSettings', typed(readSettingsTarget, delegateAnswer, handler), options);
  },
  /** Posts `willPresent`; `presentationOptions(result)` reads the decision. */
  postWillPresent(notification, options = {}) {
    return this.post('willPresent', { notification }, options);
  },
  /** Posts `didReceive`; the broker refuses what the categories do not allow (`invalid_action`). */
  postDidReceive(response, options = {}) {
    return this.post('didReceive', response, options);
  },
  /** Posts `openSettings`, from a notification or (null) from the system settings. */
  postOpenSettings(notification, options = {}) {
    return this.post('openSettings', { notification: notification ?? null }, options);
  },
  /** Takes the response that launched the app, once; null when there is none. `wait` is in ms. */
  launchNotificationResponse(options = {}) {
    return this.take(LAUNCH_SLOT, options);
  },
  /**
   * The one call an app makes at start where `notifbus desktop --app-id APP_ID` may start it
   * (Protocol/DESKTOP.md §7): takes the response that launched the app from slot `launch`
   * (once; null when none did), then observes `didReceive` with `handler` under the key
   * `appId`, which tells the bridge the app runs and hands it the clicks that came while it
   * started, in order. `activatedFor` is the notification identifier of a D-Bus activation
   * (the target of `ActivateAction`): the response is then waited for up to `wait` ms
   * (default ACTIVATION_WAIT) and is the same one; the D-Bus call itself is not a second click.
   * Resolves to `{launchResponse, observer}`.
   */
  async receiveNotificationResponses(appId, handler, { activatedFor = null, wait, priority, ...call } = {}) {
    const launchWait = wait ?? (activatedFor == null ? undefined : ACTIVATION_WAIT);
    const launchResponse = await this.take(LAUNCH_SLOT, {
      ...call,
      ...(launchWait == null ? {} : { wait: launchWait }),
    });
    const observer = await this.addDidReceiveObserver(handler, {
      ...call,
      key: appId,
      ...(priority == null ? {} : { priority }),
    });
    return { launchResponse, observer };
  },
};

for (const [name, method] of Object.entries(profile)) {
  Object.defineProperty(Client.prototype, name, { value: method, writable: true, configurable: true });
}
