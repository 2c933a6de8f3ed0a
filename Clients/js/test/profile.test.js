// The notification profile (typed willPresent, didReceive and openSettings observers,
// typed posts, the launch response) and monitor's 'seen' frames against the real broker.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { DEFAULT_ACTION_IDENTIFIER, HANDLED, PASS, presentationOptions, STOP } from '../src/index.js';
import { useBroker, within } from '../test-support/broker.js';

const bus = useBroker();
const T = { timeout: 10_000 };

describe('notification profile', () => {
  test('willPresent observers return presentation options in their order, or null', T, async () => {
    const [observer, poster] = [await bus.client('observer'), await bus.client('poster')];
    const seen = [];
    await observer.addWillPresentObserver(
      async (notification) => {
        seen.push(notification.identifier);
        return notification.content.threadIdentifier === 'chat' ? ['sound', 'banner'] : null;
      },
      { priority: 10 },
    );
    const shown = await poster.postWillPresent({
      identifier: 'm1',
      content: { title: 'Ana', threadIdentifier: 'chat' },
    });
    assert.equal(shown.outcome, 'completed');
    assert.deepEqual(presentationOptions(shown), ['sound', 'banner']);
    const passed = await poster.postWillPresent({ identifier: 'm2', content: {} });
    assert.equal(passed.outcome, 'unhandled');
    assert.equal(presentationOptions(passed), null);
    assert.deepEqual(seen, ['m1', 'm2']);
  });

  test('didReceive and openSettings observers, and the launch response taken once', T, async () => {
    const [observer, poster] = [await bus.client('observer'), await bus.client('poster')];
    await observer.addDidReceiveObserver((response) => (response.userText === 'stop' ? STOP : PASS));
    await observer.addOpenSettingsObserver((notification) => (notification === null ? HANDLED : PASS));
    const tap = { actionIdentifier: DEFAULT_ACTION_IDENTIFIER, notification: { identifier: 'm3', content: {} } };
    const clicked = await poster.postDidReceive(tap);
    assert.equal(clicked.outcome, 'unhandled');
    assert.equal(clicked.retained, 'launch');
    const launch = await poster.launchNotificationResponse();
    assert.equal(launch.notification.identifier, 'm3');
    assert.equal(await poster.launchNotificationResponse(), null);
    assert.equal((await poster.postOpenSettings(null)).outcome, 'completed');
    assert.equal((await poster.postOpenSettings({ identifier: 'm4', content: {} })).outcome, 'unhandled');
  });

  test('an app takes its launch response, then observes didReceive under its id', T, async () => {
    const [app, bridge] = [await bus.client('app'), await bus.client('bridge')];
    const tap = { actionIdentifier: DEFAULT_ACTION_IDENTIFIER, notification: { identifier: 'm1', content: {} } };
    assert.equal((await bridge.postDidReceive(tap)).retained, 'launch');
    const seen = [];
    const start = await app.receiveNotificationResponses(
      'org.example.Mail',
      (response) => {
        seen.push(response.notification.identifier);
        return HANDLED;
      },
      { activatedFor: 'm1' },
    );
    assert.equal(start.launchResponse.notification.identifier, 'm1');
    const observers = (await bridge.status()).observers;
    assert.deepEqual(
      observers.map((o) => [o.observer, o.key, o.events]),
      [[start.observer, 'org.example.Mail', ['didReceive']]],
    );
    const later = { actionIdentifier: DEFAULT_ACTION_IDENTIFIER, notification: { identifier: 'm2', content: {} } };
    assert.equal((await bridge.postDidReceive(later)).outcome, 'completed');
    assert.deepEqual(seen, ['m2']);
    assert.equal((await app.receiveNotificationResponses('org.example.Mail', () => HANDLED)).launchResponse, null);
  });

  test('monitor emits every frame of the other clients, in order', T, async () => {
    const [watcher, writer] = [await bus.client('watcher'), await bus.client('writer')];
    const puts = [];
    await watcher.monitor(
      ({ dir, client, frame }) => {
        if (dir === 'in' && frame.op === 'put') puts.push([client, frame.value]);
      },
      { timeout: 5000 },
    );
    for (let n = 0; n < 5; n += 1) await writer.put('m', n);
    const allSeen = (async () => {
      while (puts.length < 5) await new Promise((r) => setTimeout(r, 20));
    })();
    await within(allSeen, 5000, 'five put frames');
    assert.deepEqual(
      puts.map(([, value]) => value),
      [0, 1, 2, 3, 4],
    );
    assert.equal(puts[0][0], writer.id);
  });
});
