import { channelsOf, upstreamModelOf, upstreamPriceOf, type ImageRole, type ReelayConfig, type VideoCapability } from "../../../../contracts/config.ts";
import type { UpstreamUsage } from "../../../../contracts/videoTask.ts";
import { ProviderMisconfigured } from "../types.ts";

/** What one of our video models is on one vendor channel. */
export interface VendorModel {
  upstreamModel: string;
  imageRole: ImageRole;
  capabilities: readonly VideoCapability[];
  /** Yuan per the vendor's billing unit, when the operator configured it. */
  upstreamPrice?: number;
}

/** The video models a provider entry serves, as that vendor names them. */
export function vendorModelsOf(config: ReelayConfig, provider: string): Map<string, VendorModel> {
  const models = new Map<string, VendorModel>();
  for (const [name, model] of Object.entries(config.videoModels)) {
    const upstreamModel = upstreamModelOf(model, provider);
    if (!channelsOf(model).includes(provider) || upstreamModel === undefined) continue;
    const upstreamPrice = upstreamPriceOf(model, provider);
    models.set(name, { upstreamModel, imageRole: model.imageRole, capabilities: model.capabilities, ...(upstreamPrice === undefined ? {} : { upstreamPrice }) });
  }
  return models;
}

export function modelFor(models: ReadonlyMap<string, VendorModel>, name: string, vendor: string): VendorModel {
  const model = models.get(name);
  if (!model) throw new ProviderMisconfigured(`video model ${name} has no ${vendor} model id for this provider (upstreamModel)`);
  return model;
}

/** What the vendor bills for a task, and its cost at the configured price (tokens are priced per million). */
export function upstreamUsageOf(unit: UpstreamUsage["unit"], amount: number, model: Pick<VendorModel, "upstreamPrice">): UpstreamUsage {
  if (model.upstreamPrice === undefined) return { unit, amount };
  const perUnitMicros = unit === "tokens" ? model.upstreamPrice : model.upstreamPrice * 1_000_000;
  return { unit, amount, costMicros: Math.round(amount * perUnitMicros) };
}

/** The key in an environment variable, as a credential; unset is our misconfiguration, told to the operator. */
export function requiredKey(value: string | undefined, variable: string): string {
  if (!value) throw new ProviderMisconfigured(`no upstream key: set the environment variable ${variable}`);
  return value;
}
